"""An append-only text buffer: O(1) appends, joined only when read.

Stages hold undecided text (tool arguments, a Hermes tool section, ...) that
grows chunk by chunk; ``str +=`` on an attribute would copy it every time.
A stage's state carries `dump()` and builds the buffer back from it: past
512 characters that is a reference to the store, not the text (spill.py).
"""

from __future__ import annotations

from typing import Any

from .spill import Spill, Stored, current, reader


def appended(state: str | list[Any], text: str, spill: Spill | None) -> str | list[Any]:
    """A dumped buffer's state with `text` appended, as the buffer's
    `dump()` would give it (core/stream_parse.py grows one so)."""
    if type(state) is list and spill is not None and len(state[4]) + len(text) <= spill.growing_chars:
        spill.kept.append(state[0])  # most chunks: nothing to flush (dumped's answer, without building a Stored)
        grown = state.copy()
        grown[4] += text
        return grown
    stored, rest = (None, state) if type(state) is str else (Stored(*state[:4]), state[4])
    rest += text
    if spill is not None:
        stored, rest, _ = _flushed(stored, rest, spill, spill.growing_chars)
    return dumped(stored, rest, spill)


def _flushed(stored: Stored | None, rest: str, spill: Spill, limit: int) -> tuple[Stored | None, str, str]:
    """Past `limit` inline characters, all but the last `tail_chars` appended
    to the store: the reference, what stays inline and what went."""
    if len(rest) <= limit:
        return stored, rest, ""
    flushed = rest[: len(rest) - spill.tail_chars]
    return spill.append(stored, flushed), rest[len(flushed) :], flushed


def dumped(stored: Stored | None, rest: str, spill: Spill | None) -> str | list[Any]:
    if stored is None:
        return rest
    if spill is not None:
        spill.kept.append(stored.key)
    return [*stored, rest]


class TextBuffer:
    __slots__ = ("_len", "_parts", "_prefix", "_stored")

    def __init__(self, text: str | list[Any] = "") -> None:
        self._stored: Stored | None = None
        self._prefix: str | None = None  # the stored text, once read
        if type(text) is list:  # dump()'s reference: [key, chars, bytes, crc, rest]
            self._stored = Stored(*text[:4])
            text = text[4]
            if (spill := current()) is not None:
                spill.loaded.append(self._stored.key)
        assert isinstance(text, str)
        self._parts: list[str] = [text] if text else []
        self._len = len(text) + (self._stored.chars if self._stored else 0)

    def append(self, text: str) -> None:
        if text:
            self._parts.append(text)
            self._len += len(text)

    def _rest(self) -> str:
        """What is not in the store."""
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def value(self) -> str:
        if self._stored is None:
            return self._rest()
        if self._prefix is None:
            self._prefix = reader().read(self._stored)
        return self._prefix + self._rest()

    def dump(self) -> str | list[Any]:
        """The buffer for a state: its text, or past the call's Spill's
        `inline_chars` a reference to the store and the last characters."""
        spill = current()
        if spill is None:
            return self.value()
        self._stored, rest, flushed = _flushed(self._stored, self._rest(), spill, spill.inline_chars)
        if flushed:
            if self._prefix is not None:
                self._prefix += flushed
            self._parts = [rest]
        return dumped(self._stored, rest, spill)

    def tail(self, n: int) -> str:
        """The last ``n`` characters, without joining the whole buffer."""
        picked: list[str] = []
        size = 0
        for part in reversed(self._parts):
            if size >= n:
                break
            picked.append(part)
            size += len(part)
        if size < n and self._stored is not None:
            return self.value()[-n:]
        return "".join(reversed(picked))[-n:] if n > 0 else ""

    def clear(self) -> None:
        self._stored = self._prefix = None
        self._parts = []
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0
