"""service.file_store: names, expiry and clean-up, on a clock the test moves; a full disk."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import re
import tempfile
from pathlib import Path

import pytest

from service.errors import InsufficientStorage, error_response
from service.file_store import BLOCK_BYTES, NAME_CHARS, FileStore


def test_files_are_kept_under_unguessable_names_until_they_expire() -> None:
    now = [100.0]
    store = FileStore(expiry_s=60, clock=lambda: now[0])
    name = asyncio.run(store.put(b"data", filename="../Bericht über Hunde.txt", media_type="text/plain"))
    other = asyncio.run(store.put(b"data", filename=".hidden", media_type="text/plain"))
    assert re.fullmatch(r"[A-Za-z0-9_-]{32}\._Bericht_ber_Hunde\.txt", name), name
    assert other.endswith(".hidden") and other.split(".")[0] != name.split(".")[0]
    stored = store.get(name)
    assert stored is not None and stored.path.read_bytes() == b"data"
    assert (stored.filename, stored.media_type) == ("../Bericht über Hunde.txt", "text/plain")
    assert store.get("../" + name) is None and store.get(stored.path.name + "x") is None
    now[0] += 60
    assert store.get(name) is None and not stored.path.exists()
    directory = stored.path.parent
    store.close()
    assert not directory.exists()


def test_a_store_that_stored_nothing_makes_no_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    store = FileStore(expiry_s=60)
    assert store.get("anything") is None
    store.close()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_file_not_written_whole_is_deleted_and_the_error_is_a_507(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """The disk fills up halfway through the write: what was written goes, and the OSError is
    answered 507 with a type clients can branch on."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    written = Path.write_bytes

    def fill_up(path: Path, data: bytes) -> int:
        written(path, data[: len(data) // 2])
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(Path, "write_bytes", fill_up)
    store = FileStore(expiry_s=60)
    with pytest.raises(InsufficientStorage) as full:
        asyncio.run(store.put(b"data" * 1000, filename="a.txt", media_type="text/plain"))
    assert isinstance(full.value.__cause__, OSError) and full.value.__cause__.errno == code
    [directory] = tmp_path.iterdir()
    assert list(directory.iterdir()) == []
    response, error_type = error_response(full.value)
    assert (response.status_code, error_type) == (507, "insufficient_storage")
    assert json.loads(response.body)["error"]["type"] == "insufficient_storage"
    store.close()


def test_other_os_errors_stay_internal_errors() -> None:
    response, error_type = error_response(PermissionError(errno.EACCES, "Permission denied"))
    assert (response.status_code, error_type) == (500, "internal_error")


def test_the_files_kept_take_at_most_max_bytes_and_room_comes_back_as_they_go() -> None:
    now = [100.0]
    store = FileStore(expiry_s=60, max_bytes=5 * BLOCK_BYTES, clock=lambda: now[0])

    async def scenario() -> None:
        first = await store.put(b"x" * (2 * BLOCK_BYTES), filename="a.html", media_type="text/html")
        now[0] += 30
        second = await store.put(b"", filename="b.txt", media_type="text/plain")  # empty: still a block
        with pytest.raises(InsufficientStorage) as full:
            await store.put(b"x" * (2 * BLOCK_BYTES + 1), filename="c.html", media_type="text/html")
        assert full.value.status == 507
        assert store.get(first) is not None and store.get(second) is not None, "links handed out keep working"
        await store.delete(second)
        third = await store.put(b"x" * (2 * BLOCK_BYTES + 1), filename="c.html", media_type="text/html")
        now[0] += 30  # the first expires
        await store.put(b"x" * (2 * BLOCK_BYTES), filename="d.html", media_type="text/html")
        assert store.bytes == 5 * BLOCK_BYTES and store.get(first) is None
        stored = store.get(third)
        assert stored is not None
        on_disk = sorted(f.stat().st_size for f in stored.path.parent.iterdir())
        assert on_disk == [2 * BLOCK_BYTES, 2 * BLOCK_BYTES + 1]

    asyncio.run(scenario())
    store.close()
    assert store.bytes == 0


def test_uploads_finishing_at_once_cannot_all_take_the_last_room() -> None:
    store = FileStore(expiry_s=60, max_bytes=3 * BLOCK_BYTES)

    async def both() -> list[str | BaseException]:
        data = b"x" * (2 * BLOCK_BYTES)
        return await asyncio.gather(
            *(store.put(data, filename=f"{i}.txt", media_type="text/plain") for i in range(2)), return_exceptions=True
        )

    stored, refused = sorted(asyncio.run(both()), key=lambda r: isinstance(r, BaseException))
    assert isinstance(stored, str) and isinstance(refused, InsufficientStorage)
    assert store.bytes == 2 * BLOCK_BYTES
    store.close()


@pytest.mark.parametrize("filename", ["b" * 250 + ".docx", "c" * 300, "d" * 200 + "." + "e" * 100])
def test_a_long_upload_name_is_shortened_in_the_link_and_kept_for_the_download(filename: str) -> None:
    store = FileStore(expiry_s=60)
    name = asyncio.run(store.put(b"data", filename=filename, media_type="text/plain"))
    stored = store.get(name)
    assert stored is not None and stored.path.read_bytes() == b"data" and stored.filename == filename
    assert len(name) <= 32 + 1 + NAME_CHARS and name[33:] in filename
    assert filename.endswith(".docx") == name.endswith(".docx")
    store.close()


def test_a_key_keeps_at_most_its_share_and_other_keys_store_theirs() -> None:
    """A quarter of the store a key: one key's files waiting for download left every other key 507."""
    store = FileStore(expiry_s=60, max_bytes=8 * BLOCK_BYTES)

    async def scenario() -> None:
        await store.put(b"x" * BLOCK_BYTES, filename="a.txt", media_type="text/plain", owner="key-a")
        with pytest.raises(InsufficientStorage, match="this key's translated files"):
            await store.put(b"x" * (BLOCK_BYTES + 1), filename="b.txt", media_type="text/plain", owner="key-a")
        await store.put(b"x" * (2 * BLOCK_BYTES), filename="c.txt", media_type="text/plain", owner="key-b")
        await store.put(b"x" * (5 * BLOCK_BYTES), filename="d.txt", media_type="text/plain")  # no keys: no share
        assert store.owned("key-a") == BLOCK_BYTES and store.owned("key-b") == 2 * BLOCK_BYTES

    asyncio.run(scenario())
    store.close()
