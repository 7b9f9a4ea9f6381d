"""Translated files kept for download: LibreTranslate's ``/translate_file`` answers with a URL to
``/download_file/<name>`` rather than with the file.

Each file lives in a private temporary directory under an unguessable name (32 random URL-safe
characters, then the uploaded file's name, as LibreTranslate names them) for ``MT_FILE_EXPIRY_S``,
and only names this store handed out are ever served: a name is a key, never a path. Expired files
are deleted by ``expire_periodically`` (run for the app's lifetime) and, at the latest, on the next
lookup; ``close`` deletes the directory with whatever is left in it. A file that cannot be written
whole is deleted at once; on a full disk that is ``InsufficientStorage`` (507) to every caller, a
DeepL document's error too. Deleting a file needs no room, so that a full disk is freed by the
downloads that delete their files (``routes.files.DownloadOnce``) and by expiry. Used from the event loop only.

The files kept take at most ``max_bytes`` of disk, each counted in whole blocks, and those of one
key (where the service has keys) at most a ``KEY_SHARE``-th of that: a file that would take more
is refused (``InsufficientStorage``, 507) and the links already handed out keep working until they
expire. Unbounded, one client stored 1.2 GB in 150 s (10 MB HTML files, their text a comment that
is kept, not translated), past the 1 GiB that ``deploy/k8s`` gives ``/tmp``, where going over has
the pod evicted; unshared, five 200 MB files of one key, never downloaded, had every other key's
answered 507.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from service.errors import InsufficientStorage, storage_full

UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9._-]+")
# Of the uploaded file's name in a stored file's: a file name on disk has at most 255 bytes, and an
# upload's name may have that many (after 230 characters, every upload was refused with a 500).
NAME_CHARS = 128
EXTENSION_CHARS = 16  # a longer one is no extension this service reads
# How often expired files are looked for at most: they outlive their expiry by up to this much.
SWEEP_INTERVAL_S = 60.0
# Half of the 1 GiB deploy/k8s gives /tmp: the other half is for the uploads being read (spooled
# there past 1 MiB) and whatever else the process writes there.
MAX_BYTES = 512 << 20
BLOCK_BYTES = 4096  # what a file takes on disk at least, and in multiples of: empty files count too
KEY_SHARE = 4


@dataclass(frozen=True)
class StoredFile:
    path: Path
    filename: str  # the uploaded file's name, for the download's Content-Disposition
    media_type: str
    expires: float  # on the store's clock
    disk_bytes: int  # what it takes on disk, in whole blocks
    owner: str | None  # the key it was stored for; None where the service has no keys


class FileStore:
    def __init__(
        self, expiry_s: float, *, max_bytes: int = MAX_BYTES, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.expiry_s = expiry_s
        self.max_bytes = max_bytes
        self.clock = clock
        self.bytes = 0  # disk the files take, those being written included
        self._writing: Counter[str] = Counter()  # disk each owner's files being written will take
        self._directory: Path | None = None  # made on first use: an app that stores nothing leaves nothing
        self._files: dict[str, StoredFile] = {}

    async def put(self, data: bytes, *, filename: str, media_type: str, owner: str | None = None) -> str:
        """Store ``data`` (written in a thread) for ``owner`` (a key; None: the service has none);
        the name to download it by. InsufficientStorage if the files kept would take more than
        ``max_bytes``, or the owner's more than its share."""
        self.expire()
        disk_bytes = -(-max(len(data), 1) // BLOCK_BYTES) * BLOCK_BYTES
        if self.bytes + disk_bytes > self.max_bytes:
            raise InsufficientStorage(
                f"the translated files waiting for download take the {self.max_bytes / 2**20:.0f} MiB kept for "
                "them: try again once some have expired (MT_FILE_EXPIRY_S), or use /v1/translate_file, which "
                "answers with the file itself"
            )
        share = self.max_bytes // KEY_SHARE
        if owner is not None and self.owned(owner) + disk_bytes > share:
            raise InsufficientStorage(
                f"this key's translated files waiting for download take its share, {share / 2**20:.0f} MiB: "
                "download them, or try again once some have expired (MT_FILE_EXPIRY_S)"
            )
        if self._directory is None:
            self._directory = Path(tempfile.mkdtemp(prefix="mt-files-"))
        name = f"{secrets.token_urlsafe(24)}.{_shortened(UNSAFE_IN_NAME.sub('_', filename).lstrip('.') or 'file')}"
        path = self._directory / name
        self.bytes += disk_bytes  # before the write: puts running at once must not all see room
        if owner is not None:
            self._writing[owner] += disk_bytes
        try:
            await asyncio.to_thread(_write_whole, path, data)
        except BaseException as e:
            self.bytes -= disk_bytes
            # Known here for what it is: a DeepL document's job would have read it as a fault.
            if isinstance(e, OSError) and storage_full(e):
                raise InsufficientStorage(
                    "the disk that holds translated files waiting for download is full: download them, or try "
                    "again once some have expired (MT_FILE_EXPIRY_S)"
                ) from e
            raise
        finally:
            if owner is not None:
                self._writing[owner] -= disk_bytes
        self._files[name] = StoredFile(path, filename, media_type, self.clock() + self.expiry_s, disk_bytes, owner)
        return name

    def owned(self, owner: str) -> int:
        """The disk ``owner``'s files take, those being written included."""
        return self._writing[owner] + sum(f.disk_bytes for f in self._files.values() if f.owner == owner)

    def get(self, name: str) -> StoredFile | None:
        """The file stored under ``name``, unless it has expired."""
        self.expire()
        return self._files.get(name)

    async def delete(self, name: str) -> None:
        """Delete the file stored under ``name`` now (async so that a response's background task
        runs it on the event loop, as every other use of the store)."""
        stored = self._files.pop(name, None)
        if stored is not None:
            self._remove(stored)

    def expire(self) -> None:
        """Delete the files whose time is up."""
        now = self.clock()
        for name, stored in list(self._files.items()):
            if stored.expires <= now:
                del self._files[name]
                self._remove(stored)

    async def expire_periodically(self) -> None:
        """Run ``expire`` every so often (as often as files expire, at most every minute), until cancelled."""
        while True:
            await asyncio.sleep(min(self.expiry_s, SWEEP_INTERVAL_S))
            self.expire()

    def _remove(self, stored: StoredFile) -> None:
        stored.path.unlink(missing_ok=True)
        self.bytes -= stored.disk_bytes

    def close(self) -> None:
        self._files.clear()
        self.bytes = 0
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None


def _shortened(name: str) -> str:
    """``name`` in at most ``NAME_CHARS`` characters, its extension kept: the download keeps its type."""
    if len(name) <= NAME_CHARS:
        return name
    _, dot, extension = name.rpartition(".")
    kept = dot + extension if dot and len(extension) <= EXTENSION_CHARS else ""
    return name[: NAME_CHARS - len(kept)] + kept


def _write_whole(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` or leave nothing there: a file not written whole is not in the
    store's list, so that neither expiry nor a lookup would ever find it."""
    try:
        path.write_bytes(data)
    except OSError:
        path.unlink(missing_ok=True)
        raise
