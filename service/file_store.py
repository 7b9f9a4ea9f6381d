"""Files kept for download, shared by every replica that shares the state database: LibreTranslate's
``/translate_file`` answers with a URL to ``/download_file/<name>`` rather than with the file, and
DeepL's documents are kept here from their upload until they are translated, then until downloaded.

Each file is a row of the state database's ``stored_files`` (``service.database``): its name, the
uploaded file's name, its type, its owner and its expiry. Its bytes are in that row on PostgreSQL
(MT_DATABASE_URL), so that any replica serves a link another made; with the embedded SQLite
database, in a file of that name in ``directory`` (``files/`` under MT_DATA_DIR), as one replica
has them. The routes see one store either way.

A file is kept under an unguessable name (32 random URL-safe characters, then the uploaded file's
name, as LibreTranslate names them) for ``MT_FILE_EXPIRY_S``, and only names this store handed out
are ever served: a name is a key, never a path. Expired files are deleted by ``expire_periodically``
(run for the app's lifetime by every replica) and are never served after their expiry. A file is
stored whole or not at all: its row is written in one transaction with its bytes (PostgreSQL), or
before its file and deleted if the file cannot be written whole (SQLite); on a full disk that is
``InsufficientStorage`` (507) to every caller, a DeepL document's error too. Deleting a file needs
no room, so that a full disk is freed by the downloads that delete their files
(``routes.files.DownloadOnce``) and by expiry.

The files kept take at most ``max_bytes``, each counted in whole blocks, and those of one key
(where the service has keys) at most a ``KEY_SHARE``-th of that, counted in the database under one
lock, so that the bound holds across replicas: a file that would take more is refused
(``InsufficientStorage``, 507) and the links already handed out keep working until they expire.
Unbounded, one client stored 1.2 GB in 150 s (10 MB HTML files, their text a comment that is kept,
not translated); unshared, five 200 MB files of one key, never downloaded, had every other key's
answered 507.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from service.database import Database, Transaction, migrated
from service.errors import InsufficientStorage, storage_full

UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9._-]+")
# Of the uploaded file's name in a stored file's: a file name on disk has at most 255 bytes, and an
# upload's name may have that many (after 230 characters, every upload was refused with a 500).
NAME_CHARS = 128
EXTENSION_CHARS = 16  # a longer one is no extension this service reads
# How often expired files are looked for at most: their bytes outlive their expiry by up to this much.
SWEEP_INTERVAL_S = 60.0
# A quarter of the 2 GiB that deploy/k8s gives MT_DATA_DIR, where SQLite's replica keeps them; on
# PostgreSQL, what the database keeps for files waiting for download.
MAX_BYTES = 512 << 20
BLOCK_BYTES = 4096  # what a file takes on disk at least, and in multiples of: empty files count too
KEY_SHARE = 4
# Any number, the same in every replica: the lock a file's room is checked and taken under.
_ROOM_LOCK = 50_052
_COLUMNS = "name, filename, media_type, owner, disk_bytes, expires"


@dataclass(frozen=True)
class StoredFile:
    name: str
    filename: str  # the uploaded file's name, for the download's Content-Disposition
    media_type: str
    owner: str | None  # the key it was stored for; None where the service has no keys
    disk_bytes: int  # what it takes, in whole blocks
    expires: float  # on the store's clock
    data: bytes = b""


class FileStore:
    def __init__(
        self,
        db: Database,
        expiry_s: float,
        *,
        directory: Path | None = None,
        max_bytes: int = MAX_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """The files of ``db``, their bytes in ``directory`` (made on first use), or in ``db``
        where ``directory`` is None: what every replica on one database must be given."""
        self.db = db
        self.expiry_s = expiry_s
        self.directory = directory
        self.max_bytes = max_bytes
        self.clock = clock

    async def put(self, data: bytes, *, filename: str, media_type: str, owner: str | None = None) -> str:
        """Store ``data`` for ``owner`` (a key; None: the service has none); the name to download
        it by. InsufficientStorage if the files kept would take more than ``max_bytes``, or the
        owner's more than its share."""
        name = f"{secrets.token_urlsafe(24)}.{_shortened(UNSAFE_IN_NAME.sub('_', filename).lstrip('.') or 'file')}"
        stored = StoredFile(name, filename, media_type, owner, _blocks(len(data)), self.clock() + self.expiry_s, data)
        await asyncio.to_thread(self._add, stored)
        if self.directory is None:
            return name
        try:
            await asyncio.to_thread(_write_whole, self.directory, name, data)
        except BaseException as e:
            await asyncio.shield(self.delete(name))
            # Known here for what it is: a DeepL document's job would have read it as a fault.
            if isinstance(e, OSError) and storage_full(e):
                raise InsufficientStorage(
                    "the disk that holds translated files waiting for download is full: download them, or try "
                    "again once some have expired (MT_FILE_EXPIRY_S)"
                ) from e
            raise
        return name

    async def get(self, name: str) -> StoredFile | None:
        """The file stored under ``name``, with its bytes, unless it has expired."""
        return await asyncio.to_thread(self._get, name)

    async def delete(self, name: str) -> None:
        """Delete the file stored under ``name`` now."""
        await asyncio.to_thread(self._delete, "name = :name", {"name": name})

    async def keep(self, names: list[str]) -> None:
        """Postpone the expiry of the files ``names`` to ``expiry_s`` from now (files still in use)."""
        if names:
            params = {f"n{i}": name for i, name in enumerate(names)}
            await asyncio.to_thread(
                lambda: migrated(self.db).statement(
                    f"UPDATE stored_files SET expires = :until WHERE name IN ({', '.join(':' + n for n in params)})",
                    {"until": self.clock() + self.expiry_s, **params},
                )
            )

    async def owned(self, owner: str | None = None) -> int:
        """What ``owner``'s files take (None: everyone's), those being written included."""
        return await asyncio.to_thread(self._owned, owner)

    async def expire(self) -> None:
        """Delete the files whose time is up."""
        await asyncio.to_thread(self._delete, "expires <= :now", {"now": self.clock()})

    async def expire_periodically(self) -> None:
        """Run ``expire`` every so often (as often as files expire, at most every minute), until cancelled."""
        while True:
            await asyncio.sleep(min(self.expiry_s, SWEEP_INTERVAL_S))
            await self.expire()

    def _add(self, stored: StoredFile) -> None:
        """The file's row, once there is room for it; with its bytes where the database keeps them."""
        with migrated(self.db).transaction() as tx:
            tx.lock(_ROOM_LOCK)  # puts on every replica at once must not all see the last room
            self._check_room(tx, stored.owner, stored.disk_bytes)
            tx.execute(
                f"INSERT INTO stored_files ({_COLUMNS}, data)"
                " VALUES (:name, :filename, :media_type, :owner, :disk_bytes, :expires, :data)",
                {
                    "name": stored.name,
                    "filename": stored.filename,
                    "media_type": stored.media_type,
                    "owner": stored.owner,
                    "disk_bytes": stored.disk_bytes,
                    "expires": stored.expires,
                    "data": stored.data if self.directory is None else None,
                },
            )

    def _check_room(self, tx: Transaction, owner: str | None, disk_bytes: int) -> None:
        [(kept, owned)] = tx.execute(
            "SELECT COALESCE(SUM(disk_bytes), 0), COALESCE(SUM(CASE WHEN owner = :owner THEN disk_bytes END), 0)"
            " FROM stored_files WHERE expires > :now",
            {"owner": owner, "now": self.clock()},
        )
        if kept + disk_bytes > self.max_bytes:
            raise InsufficientStorage(
                f"the translated files waiting for download take the {self.max_bytes / 2**20:.0f} MiB kept for "
                "them: try again once some have expired (MT_FILE_EXPIRY_S), or use /v1/translate_file, which "
                "answers with the file itself"
            )
        share = self.max_bytes // KEY_SHARE
        if owner is not None and owned + disk_bytes > share:
            raise InsufficientStorage(
                f"this key's translated files waiting for download take its share, {share / 2**20:.0f} MiB: "
                "download them, or try again once some have expired (MT_FILE_EXPIRY_S)"
            )

    def _get(self, name: str) -> StoredFile | None:
        rows = migrated(self.db).statement(
            f"SELECT {_COLUMNS}, data FROM stored_files WHERE name = :name AND expires > :now",
            {"name": name, "now": self.clock()},
        )
        if not rows:
            return None
        *columns, data = rows[0]
        if self.directory is not None:
            try:
                data = (self.directory / name).read_bytes()
            except FileNotFoundError:  # its writer stopped between the row and the file
                return None
        return StoredFile(*columns, data=bytes(data))

    def _owned(self, owner: str | None) -> int:
        where = "" if owner is None else " AND owner = :owner"
        [(owned,)] = migrated(self.db).statement(
            f"SELECT COALESCE(SUM(disk_bytes), 0) FROM stored_files WHERE expires > :now{where}",
            {"now": self.clock(), "owner": owner},
        )
        return int(owned)

    def _delete(self, where: str, params: dict[str, object]) -> None:
        """Delete the rows ``where`` says, then their files: a file whose row is gone is never served."""
        deleted = migrated(self.db).statement(f"DELETE FROM stored_files WHERE {where} RETURNING name", params)
        if self.directory is not None:
            for (name,) in deleted:
                (self.directory / name).unlink(missing_ok=True)


def _blocks(size: int) -> int:
    return -(-max(size, 1) // BLOCK_BYTES) * BLOCK_BYTES


def _shortened(name: str) -> str:
    """``name`` in at most ``NAME_CHARS`` characters, its extension kept: the download keeps its type."""
    if len(name) <= NAME_CHARS:
        return name
    _, dot, extension = name.rpartition(".")
    kept = dot + extension if dot and len(extension) <= EXTENSION_CHARS else ""
    return name[: NAME_CHARS - len(kept)] + kept


def _write_whole(directory: Path, name: str, data: bytes) -> None:
    """Write ``data`` to ``name`` in ``directory`` or leave nothing there."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    try:
        path.write_bytes(data)
    except OSError:
        path.unlink(missing_ok=True)
        raise
