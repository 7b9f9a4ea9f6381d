"""Room kept on a disk for deleting. SQLite writes a deletion to its write-ahead log before the
database's pages are freed, so on a full disk a DELETE fails like any write (a glossary store that
filled its disk answered 507 to the DELETE that would have made room). A file of
``RESERVE_BYTES`` is kept beside the database while there is room; on a full disk it is given up
for the deletion, and made again once there is room again."""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

RESERVE_BYTES = 4 << 20  # the log of a deletion's steps (``service.glossaries``), several times over
# Room the reserve leaves: made on a disk with less, it would fill the disk again at once, and
# SQLite needs a few pages to open a database at all (its shared index is sized when opened: on a
# full disk even a read fails, with an I/O error).
HEADROOM_BYTES = 1 << 20


class Reserve:
    def __init__(self, path: Path) -> None:
        self.path = path

    def keep(self) -> None:
        """Make the reserve if it is missing and there is room for it and ``HEADROOM_BYTES`` beside
        it (written whole, or not at all)."""
        free = free_bytes(self.path.parent)
        if self.path.exists() or free is None or free < RESERVE_BYTES + HEADROOM_BYTES:
            return
        partial = self.path.with_name(self.path.name + ".partial")
        try:
            with partial.open("wb") as file:
                file.write(bytes(RESERVE_BYTES))  # written, not sparse: the blocks must be taken
                file.flush()
                os.fsync(file.fileno())
            partial.rename(self.path)
        except OSError:
            partial.unlink(missing_ok=True)

    def release(self) -> None:
        """Give the reserve's room back to the disk."""
        if self.path.exists():
            log.warning(
                "the disk of %s is full: its reserve of %d MiB given up to delete", self.path, RESERVE_BYTES >> 20
            )
            self.path.unlink(missing_ok=True)


def free_bytes(directory: Path) -> int | None:
    """Bytes this process may still write on ``directory``'s file system; None if it cannot tell."""
    try:
        usage = os.statvfs(directory)
    except OSError:
        return None
    return usage.f_bavail * usage.f_frsize
