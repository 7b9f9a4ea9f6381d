"""service.file_store on both backends (SQLite with files in a directory, PostgreSQL with the bytes
in it): names, expiry and clean-up on a clock the test moves; room and a key's share held across
two replicas on one database; a full disk."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import re
from pathlib import Path

import pytest
from postgres_server import postgres  # noqa: F401 (the fixture)
from state_stores import Replicas, replicas  # noqa: F401 (the fixture)

from service.errors import InsufficientStorage, error_response
from service.file_store import BLOCK_BYTES, NAME_CHARS


def test_files_are_kept_under_unguessable_names_until_they_expire(replicas: Replicas) -> None:  # noqa: F811
    now = [100.0]
    store, other_replica = replicas.files(60, clock=lambda: now[0]), replicas.files(60, clock=lambda: now[0])

    async def scenario() -> None:
        name = await store.put(b"data", filename="../Bericht über Hunde.txt", media_type="text/plain")
        other = await store.put(b"data", filename=".hidden", media_type="text/plain")
        assert re.fullmatch(r"[A-Za-z0-9_-]{32}\._Bericht_ber_Hunde\.txt", name), name
        assert other.endswith(".hidden") and other.split(".")[0] != name.split(".")[0]
        stored = await other_replica.get(name)
        assert stored is not None and stored.data == b"data"
        assert (stored.filename, stored.media_type) == ("../Bericht über Hunde.txt", "text/plain")
        assert await store.get("../" + name) is None and await store.get(name + "x") is None
        now[0] += 60
        assert await store.get(name) is None
        await other_replica.expire()
        assert await store.owned() == 0
        if replicas.directory is not None:
            assert list(replicas.directory.iterdir()) == []

    asyncio.run(scenario())


def test_a_store_that_stored_nothing_makes_no_directory(replicas: Replicas) -> None:  # noqa: F811
    store = replicas.files()
    assert asyncio.run(store.get("anything")) is None
    assert replicas.directory is None or not replicas.directory.exists()


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_file_not_written_whole_is_deleted_and_the_error_is_a_507(
    replicas: Replicas,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    code: int,
) -> None:
    """The disk fills up halfway through the write: what was written goes, and the OSError is
    answered 507 with a type clients can branch on (SQLite's replica: its files are on a disk)."""
    if replicas.directory is None:
        pytest.skip("PostgreSQL keeps the bytes in its row, written with it or not at all")
    written = Path.write_bytes

    def fill_up(path: Path, data: bytes) -> int:
        written(path, data[: len(data) // 2])
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(Path, "write_bytes", fill_up)
    store = replicas.files()
    with pytest.raises(InsufficientStorage) as full:
        asyncio.run(store.put(b"data" * 1000, filename="a.txt", media_type="text/plain"))
    assert isinstance(full.value.__cause__, OSError) and full.value.__cause__.errno == code
    assert list(replicas.directory.iterdir()) == [] and asyncio.run(store.owned()) == 0
    response, error_type = error_response(full.value)
    assert (response.status_code, error_type) == (507, "insufficient_storage")
    assert json.loads(response.body)["error"]["type"] == "insufficient_storage"


def test_other_os_errors_stay_internal_errors() -> None:
    response, error_type = error_response(PermissionError(errno.EACCES, "Permission denied"))
    assert (response.status_code, error_type) == (500, "internal_error")


def test_the_files_kept_take_at_most_max_bytes_and_room_comes_back_as_they_go(replicas: Replicas) -> None:  # noqa: F811
    now = [100.0]
    store = replicas.files(60, max_bytes=5 * BLOCK_BYTES, clock=lambda: now[0])

    async def scenario() -> None:
        first = await store.put(b"x" * (2 * BLOCK_BYTES), filename="a.html", media_type="text/html")
        now[0] += 30
        second = await store.put(b"", filename="b.txt", media_type="text/plain")  # empty: still a block
        with pytest.raises(InsufficientStorage) as full:
            await store.put(b"x" * (2 * BLOCK_BYTES + 1), filename="c.html", media_type="text/html")
        assert full.value.status == 507
        assert await store.get(first) is not None and await store.get(second) is not None, "links keep working"
        await store.delete(second)
        third = await store.put(b"x" * (2 * BLOCK_BYTES + 1), filename="c.html", media_type="text/html")
        now[0] += 30  # the first expires
        await store.put(b"x" * (2 * BLOCK_BYTES), filename="d.html", media_type="text/html")
        assert await store.owned() == 5 * BLOCK_BYTES and await store.get(first) is None
        stored = await store.get(third)
        assert stored is not None and stored.data == b"x" * (2 * BLOCK_BYTES + 1)

    asyncio.run(scenario())


def test_puts_on_two_replicas_at_once_cannot_all_take_the_last_room(replicas: Replicas) -> None:  # noqa: F811
    stores = [replicas.files(max_bytes=3 * BLOCK_BYTES) for _ in range(2)]

    async def both() -> list[str | BaseException]:
        data = b"x" * (2 * BLOCK_BYTES)
        puts = [store.put(data, filename=f"{i}.txt", media_type="text/plain") for i, store in enumerate(stores * 2)]
        return await asyncio.gather(*puts, return_exceptions=True)

    results = asyncio.run(both())
    assert sum(isinstance(r, str) for r in results) == 1, results
    assert all(isinstance(r, (str, InsufficientStorage)) for r in results), results
    assert asyncio.run(stores[1].owned()) == 2 * BLOCK_BYTES


@pytest.mark.parametrize("filename", ["b" * 250 + ".docx", "c" * 300, "d" * 200 + "." + "e" * 100])
def test_a_long_upload_name_is_shortened_in_the_link_and_kept_for_the_download(
    replicas: Replicas,  # noqa: F811
    filename: str,
) -> None:
    store = replicas.files()
    name = asyncio.run(store.put(b"data", filename=filename, media_type="text/plain"))
    stored = asyncio.run(store.get(name))
    assert stored is not None and stored.data == b"data" and stored.filename == filename
    assert len(name) <= 32 + 1 + NAME_CHARS and name[33:] in filename
    assert filename.endswith(".docx") == name.endswith(".docx")


def test_a_key_keeps_at_most_its_share_on_every_replica_and_other_keys_store_theirs(
    replicas: Replicas,  # noqa: F811
) -> None:
    """A quarter of the store a key, however many replicas it stores through: one key's files
    waiting for download left every other key 507."""
    one, other = replicas.files(max_bytes=8 * BLOCK_BYTES), replicas.files(max_bytes=8 * BLOCK_BYTES)

    async def scenario() -> None:
        await one.put(b"x" * BLOCK_BYTES, filename="a.txt", media_type="text/plain", owner="key-a")
        with pytest.raises(InsufficientStorage, match="this key's translated files"):
            await other.put(b"x" * (BLOCK_BYTES + 1), filename="b.txt", media_type="text/plain", owner="key-a")
        await other.put(b"x" * (2 * BLOCK_BYTES), filename="c.txt", media_type="text/plain", owner="key-b")
        await one.put(b"x" * (5 * BLOCK_BYTES), filename="d.txt", media_type="text/plain")  # no keys: no share
        assert (await other.owned("key-a"), await one.owned("key-b")) == (BLOCK_BYTES, 2 * BLOCK_BYTES)

    asyncio.run(scenario())
