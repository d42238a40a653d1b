"""The reasoning pass of an engine family (vLLM's ``extract_reasoning``).

vLLM runs the family's engine over the whole output with tool parsing
skipped: reasoning is the ``REASONING`` event text (``rstrip()``-ed when the
grammar says so), content the ``TEXT`` event text, either None when empty.
Here the same machine runs chunk by chunk.  State: the machine's cursor
(lexer hold < the longest terminal) and, with stripping, the trailing
reasoning whitespace.
"""

from __future__ import annotations

from typing import Any

from .grammar import Event, State
from .machine import Cursor, Machine


class EngineReasoningStage:
    reasoning_nullable = True

    def __init__(self, machine: Machine, initial: State, *, raw: bool, state: dict[str, Any] | None = None) -> None:
        self._machine = machine
        self._raw = raw  # thinking off and the family returns the output as is
        # vLLM: (None, output) -> content "" stays "", not None.
        self.content_nullable = not raw
        self._strip = machine.grammar.strip_trailing_reasoning_whitespace
        s = state or {}
        cur = s.get("c")
        self._cur = Cursor(initial) if cur is None else Cursor.from_state(cur)
        self._ws: str = s.get("ws", "")

    def to_state(self) -> dict[str, Any]:
        return {"c": self._cur.to_state(), "ws": self._ws}

    def feed(self, text: str) -> tuple[str, str]:
        if self._raw:
            return "", text
        return self._split(self._machine.feed(self._cur, text))

    def finish(self) -> tuple[str, str]:
        if self._raw:
            return "", ""
        reasoning, content = self._split(self._machine.finish(self._cur))
        self._ws = ""  # trailing reasoning whitespace is stripped
        return reasoning, content

    def _split(self, events: list[tuple[Event, str, int]]) -> tuple[str, str]:
        reasoning: list[str] = []
        content: list[str] = []
        for event, text, _ in events:
            if event is Event.REASONING:
                reasoning.append(text)
            elif event is Event.TEXT:
                content.append(text)
        return self._hold_trailing_ws("".join(reasoning)), "".join(content)

    def _hold_trailing_ws(self, reasoning: str) -> str:
        if not self._strip or not reasoning:
            return reasoning
        text = self._ws + reasoning
        kept = text.rstrip()
        self._ws = text[len(kept) :]
        return kept
