"""Resident memory of a process, for the model pool's memory budget and ``/v1/models``."""

from __future__ import annotations

import os

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes(pid: int | None = None) -> int:
    """Resident set size of ``pid`` (default: this process); 0 where /proc cannot tell (not Linux,
    or the process is gone)."""
    try:
        with open(f"/proc/{pid or 'self'}/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0
