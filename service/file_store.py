"""Translated files kept for download: LibreTranslate's ``/translate_file`` answers with a URL to
``/download_file/<name>`` rather than with the file.

Each file lives in a private temporary directory under an unguessable name (32 random URL-safe
characters, then the uploaded file's name, as LibreTranslate names them) for ``MT_FILE_EXPIRY_S``,
and only names this store handed out are ever served: a name is a key, never a path. Expired files
are deleted by ``expire_periodically`` (run for the app's lifetime) and, at the latest, on the next
lookup; ``close`` deletes the directory with whatever is left in it. A file that cannot be written
whole (a full disk: ``errors.py`` answers 507) is deleted at once. Used from the event loop only.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9._-]+")
# How often expired files are looked for at most: they outlive their expiry by up to this much.
SWEEP_INTERVAL_S = 60.0


@dataclass(frozen=True)
class StoredFile:
    path: Path
    filename: str  # the uploaded file's name, for the download's Content-Disposition
    media_type: str
    expires: float  # on the store's clock


class FileStore:
    def __init__(self, expiry_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.expiry_s = expiry_s
        self.clock = clock
        self._directory: Path | None = None  # made on first use: an app that stores nothing leaves nothing
        self._files: dict[str, StoredFile] = {}

    async def put(self, data: bytes, *, filename: str, media_type: str) -> str:
        """Store ``data`` (written in a thread); the name to download it by."""
        self.expire()
        if self._directory is None:
            self._directory = Path(tempfile.mkdtemp(prefix="mt-files-"))
        name = f"{secrets.token_urlsafe(24)}.{UNSAFE_IN_NAME.sub('_', filename).lstrip('.') or 'file'}"
        path = self._directory / name
        await asyncio.to_thread(_write_whole, path, data)
        self._files[name] = StoredFile(path, filename, media_type, self.clock() + self.expiry_s)
        return name

    def get(self, name: str) -> StoredFile | None:
        """The file stored under ``name``, unless it has expired."""
        self.expire()
        return self._files.get(name)

    async def delete(self, name: str) -> None:
        """Delete the file stored under ``name`` now (async so that a response's background task
        runs it on the event loop, as every other use of the store)."""
        stored = self._files.pop(name, None)
        if stored is not None:
            stored.path.unlink(missing_ok=True)

    def expire(self) -> None:
        """Delete the files whose time is up."""
        now = self.clock()
        for name, stored in list(self._files.items()):
            if stored.expires <= now:
                del self._files[name]
                stored.path.unlink(missing_ok=True)

    async def expire_periodically(self) -> None:
        """Run ``expire`` every so often (as often as files expire, at most every minute), until cancelled."""
        while True:
            await asyncio.sleep(min(self.expiry_s, SWEEP_INTERVAL_S))
            self.expire()

    def close(self) -> None:
        self._files.clear()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None


def _write_whole(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` or leave nothing there: a file not written whole is not in the
    store's list, so that neither expiry nor a lookup would ever find it."""
    try:
        path.write_bytes(data)
    except OSError:
        path.unlink(missing_ok=True)
        raise
