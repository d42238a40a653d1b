"""``minimax_m3`` reasoning: vLLM 0.34's ``MiniMaxM3ReasoningParser.extract_reasoning``.

MiniMax M3 thinks in ``<mm:think>...</mm:think>``; the chat template opens the
block itself when ``chat_template_kwargs`` say ``thinking_mode: "enabled"``.
Not an engine family: vLLM's legacy parser reads the whole output with
string searches, in this order:

1. thinking off and the output starts with ``</mm:think>``: that stray
   closer is dropped, the rest is the content, markers and all;
2. thinking on and no ``<mm:think>`` anywhere: reasoning up to the first
   ``</mm:think>`` (all of it without one), the content after it;
3. no ``<mm:think>``: the output is the content (``""`` stays ``""``);
4. otherwise the text before the first ``<mm:think>`` and after the first
   ``</mm:think>`` behind it is the content, the text between the reasoning
   (to the end without a closer).

Reasoning is kept as it is (not stripped), ``""`` included in 2 and 4;
content is None when empty but in 3.  So with thinking off the output
streams once its first characters show it does not start with
``</mm:think>``; with thinking on, where only a ``<mm:think>`` anywhere
tells 2 from 4, all of it is held until one shows or the output ends (the
state grows with it).  State: the step, the partial marker or the held text.
"""

from __future__ import annotations

from typing import Any

from .buffer import TextBuffer
from .lexer import LiteralLexer, partial_marker_len
from .passage import NOTHING, Passage

NAME = "minimax_m3"
START, END = "<mm:think>", "</mm:think>"

# Steps: deciding a leading closer (thinking off), waiting for a <mm:think>
# (thinking on), content before it, reasoning, content after it, content
# after a leading closer.
LEAD, WAIT, BEFORE, INSIDE, AFTER, STRAY = "lead", "wait", "before", "inside", "after", "stray"
# The marker BEFORE and INSIDE look for, as a lexer: without it in the text,
# its scan holds what _feed holds (partial_marker_len) and releases the rest.
_MARKER = {BEFORE: LiteralLexer({START: "START"}), INSIDE: LiteralLexer({END: "END"})}


class MiniMaxM3ReasoningStage:
    def __init__(self, thinking: bool, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self._step: str = s.get("step", WAIT if thinking else LEAD)
        self._held = TextBuffer(s.get("held", ""))
        self._nullable()

    def _nullable(self) -> None:
        # None for an empty field: reasoning in 1 and 3, content in all but 3.
        self.reasoning_nullable = self._step in (LEAD, BEFORE, STRAY)
        self.content_nullable = self._step not in (LEAD, BEFORE)

    def to_state(self) -> dict[str, Any]:
        return {"step": self._step, "held": self._held.dump()}

    def passage(self) -> Passage | None:
        """Content after the reasoning (or a leading closer), and content before
        a ``<mm:think>`` or reasoning inside one, read on after a partial
        marker held (passage.py); the steps still deciding hold everything."""
        step = self._step
        if step in (AFTER, STRAY):
            return Passage("content")
        if step in (LEAD, WAIT):
            return None
        return Passage("content" if step == BEFORE else "reasoning", lexers=(_MARKER[step],),
                       holds=(self._held.value(),), inert=(NOTHING,))

    def feed(self, text: str) -> tuple[str, str]:
        reasoning, content = self._feed(text)
        self._nullable()
        return reasoning, content

    def _feed(self, text: str) -> tuple[str, str]:
        step = self._step
        if step in (AFTER, STRAY):
            return "", text
        if step == LEAD:
            held = self._held.value() + text
            if held.startswith(END):
                self._held.clear()
                self._step = STRAY
                return "", held[len(END) :]
            if END.startswith(held):
                self._held = TextBuffer(held)
                return "", ""
            self._held.clear()
            self._step = BEFORE
            return self._feed(held)
        if step == WAIT:
            window = self._held.tail(len(START) - 1) + text
            self._held.append(text)
            at = window.find(START)
            if at < 0:
                return "", ""
            full = self._held.value()
            cut = len(full) - len(window) + at
            self._held.clear()
            self._step = INSIDE
            reasoning, content = self._feed(full[cut + len(START) :])
            return reasoning, full[:cut] + content
        marker = START if step == BEFORE else END
        held = self._held.value() + text
        at = held.find(marker)
        if at < 0:
            keep = partial_marker_len(held, marker)
            self._held = TextBuffer(held[len(held) - keep :] if keep else "")
            out = held[: len(held) - keep]
            return ("", out) if step == BEFORE else (out, "")
        self._held.clear()
        rest = held[at + len(marker) :]
        if step == BEFORE:
            self._step = INSIDE
            reasoning, content = self._feed(rest)
            return reasoning, held[:at] + content
        self._step = AFTER
        return held[:at], rest

    def finish(self) -> tuple[str, str]:
        held = self._held.value()
        self._held.clear()
        step = self._step
        if step == WAIT:  # no <mm:think>: reasoning up to the first closer
            reasoning, end, content = held.partition(END)
            self._step = AFTER if end else INSIDE
            self._nullable()
            return reasoning, content
        if step == INSIDE:
            return held, ""
        return "", held  # a partial marker, or a partial closer at the start
