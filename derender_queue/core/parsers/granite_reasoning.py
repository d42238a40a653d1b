"""``granite`` reasoning: vLLM 0.34's ``GraniteReasoningParser.extract_reasoning``.

Granite 3.2 writes ``Here is my thought process: ... Here is my response: ...``
(``Here's`` too).  vLLM takes the first match of ``THINK(.*?)RESPONSE(.*)``:
the reasoning runs from the first thought-process marker to the first
response marker after it, the content is everything after that (None if
empty), and text before the first marker is dropped.  Without both markers
the whole output is the content and there is no reasoning.

So nothing is decided until a response marker follows a thought-process
marker: until then the output is held, all of it (the one way to answer as
vLLM does when the response marker never comes); from then on the content
streams.  State: the phase, the held text and the first marker's end.
"""

from __future__ import annotations

import re
from typing import Any

from .buffer import TextBuffer
from .passage import Passage, holding

GRANITE = "granite"
_THINK = re.compile(r"(?:Here's|Here is) my thought process:")
_RESPONSE = re.compile(r"(?:Here's|Here is) my response:")
_LONGEST = len("Here is my thought process:")


class GraniteReasoningStage:
    def __init__(self, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self._matched: bool = s.get("matched", False)  # content streams
        self._held = TextBuffer(s.get("held", ""))
        self._think_end: int | None = s.get("think_end")  # end of the first thought-process marker
        self._nullable()

    def _nullable(self) -> None:
        """vLLM: no match -> (None, output); a match -> (reasoning, content or None)."""
        self.reasoning_nullable = not self._matched
        self.content_nullable = self._matched

    def to_state(self) -> dict[str, Any]:
        # "scanned" (where the next search starts) is the marker's end now: the search reads a
        # window of the latest text; the key stays, so states issued before still resume.
        return {"matched": self._matched, "held": self._held.dump(), "think_end": self._think_end,
                "scanned": self._think_end or 0}  # fmt: skip

    def passage(self) -> Passage:
        if self._matched:
            return Passage("content")
        return holding("held", frozenset("H"), ("H" * _LONGEST,))  # every marker begins "Here"

    def feed(self, text: str) -> tuple[str, str]:
        if self._matched:
            return "", text
        self._held.append(text)
        # Search what a marker can lie in (the held text may be in the store: buffer.py).
        window = self._held.tail(len(text) + _LONGEST - 1)
        base = len(self._held) - len(window)
        if self._think_end is None:
            m = _THINK.search(window)
            if m is None:  # (nor earlier: it was searched for in every window)
                return "", ""
            self._think_end = base + m.end()
        r = _RESPONSE.search(window, max(0, self._think_end - base))
        if r is None:
            return "", ""
        held = self._held.value()
        self._matched = True
        self._nullable()
        self._held.clear()
        return held[self._think_end : base + r.start()], held[base + r.end() :]

    def finish(self) -> tuple[str, str]:
        if self._matched:
            return "", ""
        held = self._held.value()
        self._held.clear()
        return "", held
