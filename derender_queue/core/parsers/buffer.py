"""An append-only text buffer: O(1) appends, joined only when read.

Stages hold undecided text (tool arguments, a Hermes tool section, ...) that
grows chunk by chunk; ``str +=`` on an attribute would copy it every time.
"""

from __future__ import annotations


class TextBuffer:
    __slots__ = ("_len", "_parts")

    def __init__(self, text: str = "") -> None:
        self._parts: list[str] = [text] if text else []
        self._len = len(text)

    def append(self, text: str) -> None:
        if text:
            self._parts.append(text)
            self._len += len(text)

    def value(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def tail(self, n: int) -> str:
        """The last ``n`` characters, without joining the whole buffer."""
        picked: list[str] = []
        size = 0
        for part in reversed(self._parts):
            if size >= n:
                break
            picked.append(part)
            size += len(part)
        return "".join(reversed(picked))[-n:] if n > 0 else ""

    def clear(self) -> None:
        self._parts = []
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0
