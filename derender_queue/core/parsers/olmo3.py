"""``olmo3`` reasoning: vLLM 0.34's ``Olmo3ReasoningParser.extract_reasoning``
(not an engine parser).

vLLM matches ``^(?:<think>)?(?P<reasoning>.*?)</think>(?P<content>.*)$``:
with a ``</think>`` the text before the first one (less an opening
``<think>``) is reasoning and the rest content, each None when empty;
without one the whole output is content, ``<think>`` included.  So nothing
is decided before the first ``</think>``: the text until then is held (the
state grows with it, as vLLM's rule requires), then reasoning is sent and
content streams.
"""

from __future__ import annotations

from typing import Any

from .buffer import TextBuffer
from .passage import Passage, holding

NAME = "olmo3"
START, END = "<think>", "</think>"


class Olmo3ReasoningStage:
    reasoning_nullable = True

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self._ended: bool = s.get("ended", False)
        self._held = TextBuffer(s.get("held", ""))  # the text before the first </think>
        # Content is None when empty only after a </think>; else it is the output.
        self.content_nullable = self._ended

    def to_state(self) -> dict[str, Any]:
        return {"ended": self._ended, "held": self._held.dump()}

    def passage(self) -> Passage:
        return Passage("content") if self._ended else holding("held", frozenset(END[0]), (END,))

    def feed(self, text: str) -> tuple[str, str]:
        if self._ended:
            return "", text
        window = self._held.tail(len(END) - 1) + text
        at = window.find(END)
        self._held.append(text)
        if at < 0:
            return "", ""
        full = self._held.value()
        cut = len(full) - len(window) + at
        self._ended = self.content_nullable = True
        self._held.clear()
        return full[:cut].removeprefix(START), full[cut + len(END) :]

    def finish(self) -> tuple[str, str]:
        held = self._held.value()
        self._held.clear()
        return "", held
