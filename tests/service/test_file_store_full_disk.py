"""The file store on a disk that is really full (a 2 MiB tmpfs; skipped where this process may not
mount one): a file the disk has no room for is a 507 with nothing of it left, and deleting or
downloading-and-deleting a stored file frees its room for the next, however the download ends."""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.app import FILES_DIRECTORY
from service.database import open_database
from service.errors import InsufficientStorage, error_response
from service.file_store import BLOCK_BYTES, FileStore
from service.launcher import LiveService
from service.routes.files import DownloadOnce

DISK_BYTES = 2 << 20
PIECE = b"x" * (64 * BLOCK_BYTES)  # 256 KiB: eight fill the disk
KEY = "disk-key"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, unmounted afterwards."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(disk)], capture_output=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def fill(disk: Path, leave: int) -> None:
    """Fill ``disk`` so that about ``leave`` bytes are free."""
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    (disk / "filler").write_bytes(b"\0" * max(0, free - leave))


def sqlite_store(state_dir: Path, files_dir: Path, **options: int) -> FileStore:
    """The embedded backend's store: its rows in SQLite in ``state_dir``, its files in ``files_dir``."""
    return FileStore(open_database("", state_dir), 60, directory=files_dir, **options)


def test_a_full_disk_is_a_507_and_a_delete_frees_room(small_disk: Path, tmp_path: Path) -> None:
    # The disk fills before the store's own limit.
    store = sqlite_store(tmp_path, small_disk / "files", max_bytes=4 * DISK_BYTES)

    async def scenario() -> None:
        names = []
        with pytest.raises(InsufficientStorage, match=r"disk .* is full") as full:
            for i in range(16):
                names.append(await store.put(PIECE, filename=f"{i}.txt", media_type="text/plain"))
        assert isinstance(full.value.__cause__, OSError) and full.value.__cause__.errno == errno.ENOSPC
        assert error_response(full.value)[0].status_code == 507
        assert len(list((small_disk / "files").iterdir())) == len(names), "nothing of the refused file is left"
        await store.delete(names[0])
        await store.put(PIECE, filename="again.txt", media_type="text/plain")
        assert await store.owned() == len(names) * len(PIECE)

    asyncio.run(scenario())


@pytest.mark.parametrize("failure", [None, OSError(errno.EPIPE, "Broken pipe"), asyncio.CancelledError()])
def test_a_download_once_deletes_its_file_however_it_ends(tmp_path: Path, failure: BaseException | None) -> None:
    """Sent whole, its send failing, or its task cancelled (the client gone): the file is gone."""
    store = sqlite_store(tmp_path, tmp_path / "files")
    name = asyncio.run(store.put(b"Ein Hund.", filename="a.txt", media_type="text/plain"))
    stored = asyncio.run(store.get(name))
    assert stored is not None
    sent: list[dict[str, object]] = []

    async def send(message: dict[str, object]) -> None:
        if failure is not None and message["type"] == "http.response.body":
            raise failure
        sent.append(message)

    async def receive() -> dict[str, object]:
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    scope = {"type": "http", "method": "POST", "headers": [], "asgi": {"spec_version": "2.4"}}
    response = DownloadOnce(store, stored)
    if failure is None:
        asyncio.run(response(scope, receive, send))  # type: ignore[arg-type]
        assert sent[-1]["body"] == b"Ein Hund."
    else:
        with pytest.raises(type(failure)):
            asyncio.run(response(scope, receive, send))  # type: ignore[arg-type]
    assert asyncio.run(store.get(name)) is None and asyncio.run(store.owned()) == 0
    assert list((tmp_path / "files").iterdir()) == []


def document(client: httpx.Client, text: bytes) -> dict[str, str]:
    """A /v2/document upload, waited for until it is no longer queued or translating."""
    uploaded = client.post("/v2/document", files={"file": ("a.txt", text)}, data={"target_lang": "DE"})
    assert uploaded.status_code == 200, uploaded.text
    ids = uploaded.json()
    for _ in range(600):  # polls, each a round trip: a state, not a duration
        status = client.post(f"/v2/document/{ids['document_id']}", data={"document_key": ids["document_key"]}).json()
        if status["status"] not in ("queued", "translating"):
            return {**ids, **status}
        time.sleep(0.05)
    raise AssertionError(f"document never finished: {status}")


def test_deepl_documents_on_a_full_disk(small_disk: Path, tiny_bundle: Path, tmp_path: Path) -> None:
    """The service's files (``files/`` under MT_DATA_DIR) on the small disk, nearly full: a document
    whose translation the disk has no room for beside its upload ends in error, one whose upload
    it has no room for is refused (507), and downloading one (which deletes it) makes room."""
    settings = {"MT_MODEL_DIR": str(tiny_bundle), "MT_THREADS": "1", "MT_LOG_LEVEL": "warning"}
    settings |= {"MT_API_KEYS": KEY, "MT_DATA_DIR": str(tmp_path / "data")}
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / FILES_DIRECTORY).symlink_to(small_disk)
    text = b"A dog runs in the park.\n" * 2000  # 12 blocks; translated: about 18 KB, five blocks
    with (
        LiveService(settings, tmp_path / "service.log") as server,
        httpx.Client(base_url=server.url, headers={"Authorization": f"DeepL-Auth-Key {KEY}"}, timeout=60) as client,
    ):
        fill(small_disk, leave=20 * BLOCK_BYTES)
        first = document(client, text)
        assert first["status"] == "done", first
        second = document(client, text)
        assert second["status"] == "error" and "disk" in second["error_message"].lower(), second
        refused = client.post("/v2/document", files={"file": ("b.txt", text * 2)}, data={"target_lang": "DE"})
        assert refused.status_code == 507 and "disk" in refused.json()["message"], refused.text
        with client.stream(
            "POST", f"/v2/document/{first['document_id']}/result", data={"document_key": first["document_key"]}
        ) as download:
            assert download.status_code == 200
        # The client left after the headers; the file is deleted all the same, and the disk has room.
        wait_for_room(small_disk, 20 * BLOCK_BYTES)
        third = document(client, text)
        assert third["status"] == "done", third
        result = client.post(
            f"/v2/document/{third['document_id']}/result", data={"document_key": third["document_key"]}
        )
        assert result.status_code == 200 and result.content.startswith(b"Ein")


def wait_for_room(disk: Path, room: int) -> None:
    """Until ``disk`` has ``room`` bytes free (a state, polled a bounded number of times)."""
    for _ in range(200):
        if os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize >= room:
            return
        time.sleep(0.05)
    raise AssertionError(f"the disk never had {room} bytes free")
