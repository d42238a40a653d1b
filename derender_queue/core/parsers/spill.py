"""Held text past 512 characters, kept in the service's store instead of the stream state.

Some families hold text until a later marker, or the end, decides what it
is (vLLM's non-streaming rule; docs/parsers.md "where the state grows").
Carried in the stream state, that text came in and went out with every
chunk, so a chunk's work and the state grew with the output.  Instead a
`TextBuffer` (buffer.py) over `Spill.inline_chars` (512; 128 for one a
growing passage appends to) writes all but its last `TAIL_CHARS` characters
to the store, a piece at a time, and its state keeps a reference: ``[key,
chars, bytes, crc32, rest]`` (the store's key, what it holds there, and the
text still inline).  A chunk then costs the state's constant size plus, once
per that many characters, one append; the text is read back only where a
stage decides it.

A derender call runs under one `Spill` (`call_spilled`): it collects the
appends (`writes`, at byte offsets: a retried chunk writes the same bytes
again), the keys to read (`needs`: reading an unfetched key raises
`HeldTextNeeded`, and the caller fetches and runs the call again; the work
is pure) and the keys a finished stream leaves (`drops`).  The worker does
the I/O (wire/held_text.py); `run_spilled` does it on a dict.  Without a
`Spill` (an in-process derender) nothing spills and the state holds the
text, as before.  The CRC catches a key that expired or that a second use
of an earlier state overwrote: a 400, never another stream's text.
"""

from __future__ import annotations

import secrets
import zlib
from collections.abc import Callable, MutableMapping
from contextvars import ContextVar
from typing import NamedTuple, TypeVar

from derender_queue.errors import bad_request

INLINE_CHARS = 512
GROWING_CHARS = 128
"""The inline size of a buffer a growing passage appends to (stream_parse.py):
read only at its end, it loses nothing by going to the store sooner, and a
smaller state costs every chunk less."""
TAIL_CHARS = 32
"""Characters a flush keeps inline: a stage's look at the last few (a marker
split across chunks, the longest 27 characters) never reads the store."""
_RERUNS = 8
Write = tuple[bytes, int, bytes]
"""(key, byte offset, bytes): SETRANGE, so writing it twice is harmless."""
T = TypeVar("T")

_GONE = (
    "stream_state refers to held text that is gone from the service's store (it expired, or an "
    "earlier stream_state of this stream was used again and overwrote it): start the stream again"
)
_NO_STORE = "stream_state refers to held text in a store this derender cannot reach"


class HeldTextNeeded(BaseException):
    """A stored buffer was read before its text was fetched (`Spill.needs`).
    A BaseException, so no stage's own `except Exception` takes it for a
    parse failure."""


class Stored(NamedTuple):
    key: bytes
    chars: int
    nbytes: int
    crc: int


class Spill:
    """One derender call's held-text I/O (module docstring): `texts`, the
    fetched keys' values (b"" for a key that is gone); `loaded`, the keys
    the call's states referred to, in order (a finished stream drops its own,
    and a stream drops those its new state no longer refers to)."""

    __slots__ = ("drops", "growing_chars", "inline_chars", "kept", "loaded", "needs", "tail_chars", "texts",
                 "writes")

    def __init__(self, texts: dict[bytes, bytes], inline_chars: int = INLINE_CHARS,
                 tail_chars: int = TAIL_CHARS) -> None:
        self.texts = texts
        self.inline_chars, self.tail_chars = inline_chars, tail_chars
        self.growing_chars = min(GROWING_CHARS, inline_chars)
        self.needs: set[bytes] = set()
        self.writes: list[Write] = []
        self.drops: list[bytes] = []
        self.loaded: list[bytes] = []
        self.kept: list[bytes] = []
        """Keys the call's new states refer to (a key loaded and not kept is left)."""

    def read(self, stored: Stored) -> str:
        data = self.texts.get(stored.key)
        if data is None:
            self.needs.add(stored.key)
            raise HeldTextNeeded
        if len(data) < stored.nbytes or zlib.crc32(data[: stored.nbytes]) != stored.crc:
            raise bad_request(_GONE, param="stream_state")
        return data[: stored.nbytes].decode("utf-8", "surrogatepass")

    def append(self, stored: Stored | None, text: str) -> Stored:
        """`text` appended to the stored text (a new key for the first piece)."""
        data = text.encode("utf-8", "surrogatepass")
        if stored is None:
            stored = Stored(secrets.token_bytes(16), 0, 0, 0)
        self.writes.append((stored.key, stored.nbytes, data))
        return Stored(stored.key, stored.chars + len(text), stored.nbytes + len(data), zlib.crc32(data, stored.crc))


_current: ContextVar[Spill | None] = ContextVar("derender_spill", default=None)


def current() -> Spill | None:
    return _current.get()


def reader() -> Spill:
    """The call's Spill, to read a stored buffer: a 400 where there is none."""
    spill = _current.get()
    if spill is None:
        raise bad_request(_NO_STORE, param="stream_state")
    return spill


def call_spilled(spill: Spill | None, call: Callable[[], T]) -> T:
    """`call()` with `spill` as the call's Spill."""
    token = _current.set(spill)
    try:
        return call()
    finally:
        _current.reset(token)


def run_spilled(call: Callable[[], T], store: MutableMapping[bytes, bytearray],
                inline_chars: int = INLINE_CHARS, tail_chars: int = TAIL_CHARS) -> T:
    """`call` under a Spill whose store is a dict (tests, benches, in-process
    users): fetched and run again while it needs keys, then written."""
    texts: dict[bytes, bytes] = {}
    for _ in range(_RERUNS):
        spill = Spill(texts, inline_chars, tail_chars)
        try:
            result = call_spilled(spill, call)
        except HeldTextNeeded:
            texts.update({key: bytes(store.get(key, b"")) for key in spill.needs})
            continue
        for key, offset, data in spill.writes:
            value = store.setdefault(key, bytearray())
            value[offset:offset + len(data)] = data
        for key in spill.drops:
            store.pop(key, None)
        return result
    raise RuntimeError("held text still needed after fetching it")
