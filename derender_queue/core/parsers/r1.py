"""``deepseek_r1`` reasoning: vLLM's ``BaseThinkingReasoningParser.extract_reasoning``
as a state machine.

vLLM partitions the whole output at the *first* ``<think>`` (dropping what
precedes it), then at the first ``</think>``; with no ``</think>`` it is all
reasoning.  So:

* after a ``<think>``: reasoning streams until ``</think>``, then content;
* before any ``<think>`` nothing is decided: a later ``<think>`` would discard
  everything so far (``a</think>b<think>c`` gives reasoning ``c``).  That text
  is held in ``pre`` until a ``<think>`` arrives or the output ends.  This is
  the one unbounded part of the state, and it is inherent to vLLM's
  non-streaming semantics for markerless (prompt-opened) reasoning.

Not an engine family (engine/), because vLLM 0.34 does not run it on its
engine either: its partition at the first ``<think>`` that discards what came
before is no transition of terminals, and a parser vLLM does not build on
its engine makes a "legacy" composition, whose content rules differ
(``ParserSpec.engine_based``).
"""

from __future__ import annotations

from typing import Any

from .buffer import TextBuffer
from .lexer import partial_marker_len
from .passage import Passage, holding

START = "<think>"
END = "</think>"

_PRE, _THINK, _CONTENT = "pre", "think", "content"


class R1ReasoningStage:
    # vLLM returns reasoning "" (not None) when it is empty, content None.
    reasoning_nullable = False
    content_nullable = True
    # The state of a parser that already read <think> (Step3ReasoningParser).
    INSIDE: dict[str, Any] = {"phase": "think", "buf": ""}  # noqa: RUF012

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        state = state or {}
        self._phase: str = state.get("phase", _PRE)
        buf = state.get("buf", "")
        # _PRE: all text so far; _THINK: a held partial "</think>".
        self._pre = TextBuffer(buf if self._phase == _PRE else "")
        self._buf: str = "" if self._phase == _PRE else buf

    def to_state(self) -> dict[str, Any]:
        buf = self._pre.dump() if self._phase == _PRE else self._buf
        return {"phase": self._phase, "buf": buf}

    def passage(self) -> Passage | None:
        """Content once reasoning ended; reasoning without a "<" while nothing is held (passage.py)."""
        if self._phase == _CONTENT:
            return Passage("content")
        if self._phase == _THINK and not self._buf:
            return Passage("reasoning", frozenset(END[0]))
        if self._phase == _PRE:
            return holding("buf", frozenset(START[0]), (START,))  # before any <think>: all held
        return None

    def feed(self, text: str) -> tuple[str, str]:
        """Returns (reasoning, content) text decided by this chunk."""
        if self._phase == _CONTENT:
            return "", text
        if self._phase == _PRE:
            window = self._pre.tail(len(START) - 1) + text
            at = window.find(START)
            if at < 0:
                self._pre.append(text)
                return "", ""
            self._phase = _THINK
            self._pre.clear()
            return self._feed_think(window[at + len(START) :])
        return self._feed_think(text)

    def _feed_think(self, text: str) -> tuple[str, str]:
        buf = self._buf + text
        at = buf.find(END)
        if at >= 0:
            self._phase, self._buf = _CONTENT, ""
            return buf[:at], buf[at + len(END) :]
        keep = partial_marker_len(buf, END)
        self._buf = buf[len(buf) - keep :]
        return buf[: len(buf) - keep], ""

    def finish(self) -> tuple[str, str]:
        if self._phase == _PRE:
            reasoning, _, content = self._pre.value().partition(END)
            self._pre.clear()
            return reasoning, content
        buf, self._buf = self._buf, ""
        if self._phase == _THINK:
            return buf, ""
        return "", ""
