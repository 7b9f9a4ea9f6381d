"""Giving the C heap's free pages back to the system.

glibc keeps freed memory for reuse, so that a process's resident size stays at its peak (a long
batch's caches, a large document's parsed tree) unless asked to return it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``; None on a C library without it (musl, macOS)."""
    path = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(path).malloc_trim if path else None
    except (OSError, AttributeError):
        return None


_MALLOC_TRIM = _malloc_trim()


def release_memory() -> None:
    """Return the heap's free pages to the system, where the C library can."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
