"""Giving freed request buffers back to the OS (glibc; a no-op elsewhere).

glibc serves a block above its mmap threshold with mmap and unmaps it on
free, but raises the threshold to the size of each such block freed (up to
32 MiB): after one burst of 20 MB bodies every later body would come from
the heap, whose freed pages stay in the process (bench/inflight.py measures
the API's memory after a burst). `tune()` pins the threshold at MMAP_THRESHOLD, so very
large blocks are always mapped and unmapped; `released()` trims the heap,
returning every free page, once TRIM_AFTER_BYTES of request bytes were freed
since the last trim and little is still held. Between trims the heap keeps
what was freed (at most about TRIM_AFTER_BYTES), so the buffers below
MMAP_THRESHOLD reuse its pages without faulting them in again
(bench/heavy_path.py counts each process's page faults per request).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging

log = logging.getLogger("derender.api")

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 8 << 20
"""Blocks from 8 MiB up are mapped: bodies and results larger than a
4000-token top-20 request's (5-6 MB), whose derender costs far more than
their page faults."""
TRIM_AFTER_BYTES = 64 << 20
"""Freed request bytes since the last trim before the heap is trimmed."""
TRIM_THRESHOLD = TRIM_AFTER_BYTES
"""Free memory at the heap's top that glibc keeps rather than shrinking the
heap at once: `released()` hands it back instead. A top-20 request frees
several 5-6 MB buffers together, so glibc's default of 128 KiB, or the
16 MiB its dynamic mode would set here, handed back and faulted in again
most of them."""

_freed = 0


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018  # glibc only: musl/macOS have neither
    except (OSError, AttributeError):
        return None
    return libc


def tune() -> None:
    """Pin glibc's mmap and trim thresholds (call once at start-up)."""
    libc = _glibc()
    if libc is None:
        return
    for option, value, name in ((_M_MMAP_THRESHOLD, MMAP_THRESHOLD, "M_MMAP_THRESHOLD"),
                                (_M_TRIM_THRESHOLD, TRIM_THRESHOLD, "M_TRIM_THRESHOLD")):
        if not libc.mallopt(option, value):
            log.warning("mallopt(%s) failed; freed bodies may stay in the heap", name)


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
