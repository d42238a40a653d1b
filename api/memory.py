"""Giving freed request buffers back to the OS (glibc; a no-op elsewhere).

glibc serves an allocation above its mmap threshold (128 KiB) with mmap and
unmaps it on free, but raises the threshold to the size of each such block
freed (up to 32 MiB): after one burst of 20 MB bodies every later body comes
from the heap, whose freed pages stay in the process (the issue measured
554 MiB kept after a burst). `tune()` pins the threshold, so big bodies are
always mapped and unmapped; `released()` trims the heap (the uvicorn chunks
a body arrived in live there) once enough was freed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("derender.api")

_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 20
"""Allocations from 1 MiB up are mapped: bodies; never the small objects."""
TRIM_AFTER_BYTES = 16 << 20
"""Freed request bytes since the last trim before the heap is trimmed."""

_libc: ctypes.CDLL | None = None
_freed = 0


def _glibc() -> ctypes.CDLL | None:
    global _libc
    if _libc is None:
        name = ctypes.util.find_library("c")
        try:
            libc = ctypes.CDLL(name or "libc.so.6")
            libc.malloc_trim, libc.mallopt  # noqa: B018  # glibc only: musl/macOS have neither
        except (OSError, AttributeError):
            return None
        _libc = libc
    return _libc


def tune() -> None:
    """Pin glibc's mmap threshold (call once at start-up)."""
    libc = _glibc()
    if libc is not None and not libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD):
        log.warning("mallopt(M_MMAP_THRESHOLD) failed; freed bodies may stay in the heap")


def released(size: int, still_held: int) -> None:
    """A request gave back `size` bytes; trim once enough was freed and little
    is still held (trimming costs a walk of the heap, so not per request)."""
    global _freed
    _freed += size
    if _freed >= TRIM_AFTER_BYTES and still_held <= _freed:
        _freed = 0
        libc = _glibc()
        if libc is not None:
            libc.malloc_trim(0)
