"""``ernie45`` reasoning and tools: vLLM 0.34's ``Ernie45ReasoningParser``
and ``Ernie45ToolParser`` (not engine parsers).  ::

    abc\\n</think>\\n\\n<response>\\ndef\\n</response>\\n
    abc\\n</think>\\n\\n<tool_call>\\n{"name": "f", "arguments": {...}}\\n</tool_call>\\n

Reasoning is DeepSeek R1's (``parsers/r1.py``); the content is then cut to
what lies between its first ``<response>`` and its last ``</response>`` when
both exist in that order.  So content before a ``<response>`` waits for one
(or the end), and text after the latest ``</response>`` waits for another.

Tools: with a ``<tool_call>`` in the text, every
``<tool_call>\\s*{...}\\s*</tool_call>`` is decoded as JSON (name, arguments);
if all decode, those are the calls and the content is the text before the
first ``<tool_call>`` without trailing newlines; if one fails, no calls and
the text as it came.  So from the first ``<tool_call>`` on the text is held
until the end, as for Hermes; the text before it streams but for trailing
newlines.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from .buffer import TextBuffer
from .deltas import DeltaBuilder, ParsedDelta, ToolCallDelta
from .ids import make_tool_call_id
from .lexer import partial_marker_len
from .passage import Passage
from .r1 import R1ReasoningStage

NAME = "ernie45"
R_START, R_END = "<response>", "</response>"
CALL = "<tool_call>"
CALL_END = "</tool_call>"


def _space(char: str) -> bool:
    """vLLM's ``\\s`` (the `regex` module's: U+001C..U+001F are not space)."""
    return char.isspace() and not "\x1c" <= char <= "\x1f"


def call_bodies(raw: str) -> Iterator[str]:
    """``re.findall(r"<tool_call>\\s*(\\{.*?\\})\\s*</tool_call>", raw, re.DOTALL)``
    (vLLM's ``tool_call_regex``), in linear time: a body runs from the ``{``
    after an opener's spaces to the first ``}`` that only spaces part from a
    ``</tool_call>``.  When an opened body has none, no later one can (its
    closers would serve the earlier body too), where the regex would retry at
    every later opener and scan to the end from each."""
    pos = 0
    while (at := raw.find(CALL, pos)) >= 0:
        brace = at + len(CALL)
        while brace < len(raw) and _space(raw[brace]):
            brace += 1
        if not raw.startswith("{", brace):
            pos = at + 1
            continue
        close = brace + 1
        while (close := raw.find(CALL_END, close)) >= 0:
            end = close  # one past the body's last character, the "}"
            while end > brace + 1 and _space(raw[end - 1]):
                end -= 1
            if end > brace + 1 and raw[end - 1] == "}":
                break
            close += 1
        if close < 0:
            return
        yield raw[brace:end]
        pos = close + len(CALL_END)


class Ernie45ReasoningStage:
    reasoning_nullable = False  # BaseThinkingReasoningParser: reasoning is a string
    content_nullable = True

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self._r1 = R1ReasoningStage(s.get("r1"))
        # Unsent content: before the first </response> after a <response>, all
        # of it (``start``: where the text after that <response> begins, or
        # None before one); after it, the text from the last </response> on.
        self._hold = TextBuffer(s.get("hold", ""))
        self._start: int | None = s.get("start")
        self._closed: bool = s.get("closed", False)

    def to_state(self) -> dict[str, Any]:
        return {"r1": self._r1.to_state(), "hold": self._hold.dump(), "start": self._start, "closed": self._closed}

    def feed(self, text: str) -> tuple[str, str]:
        reasoning, content = self._r1.feed(text)
        return reasoning, self._content(content)

    def passage(self) -> Passage | None:
        """The R1 stage's while it holds everything (before any <think>)."""
        passage = self._r1.passage()
        return passage._replace(grows=("r1", *passage.grows)) if passage is not None and passage.grows else None

    def finish(self) -> tuple[str, str]:
        reasoning, content = self._r1.finish()
        out = self._content(content)
        held = self._hold.value()
        self._hold.clear()
        return reasoning, out if self._closed else out + held  # after the last </response>: cut

    def _content(self, text: str) -> str:
        if not text:
            return ""
        if self._start is None:
            window = self._hold.tail(len(R_START) - 1) + text
            self._hold.append(text)
            at = window.find(R_START)
            if at < 0:
                return ""
            self._start = len(self._hold) - len(window) + at + len(R_START)
            text = ""
            window = self._hold.value()[self._start :]
        else:
            window = self._hold.tail(len(R_END) - 1) + text
            self._hold.append(text)
        at = window.rfind(R_END)
        if at < 0:
            return ""
        end = len(self._hold) - len(window) + at
        held = self._hold.value()
        out = held[self._start if not self._closed else 0 : end]
        self._closed, self._start = True, 0
        self._hold = TextBuffer(held[end:])
        return out


class Ernie45ToolStage:
    def __init__(self, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self._marker: str = s.get("marker", "")  # a partial <tool_call>
        self._pending: str = s.get("pending", "")  # blank text, or trailing newlines, not sent yet
        self._sent: bool = s.get("sent", False)  # content with non-space text was sent
        self._raw = None if s.get("raw") is None else TextBuffer(s["raw"])  # from the first <tool_call>

    def to_state(self) -> dict[str, Any]:
        return {"marker": self._marker, "pending": self._pending, "sent": self._sent,
                "raw": None if self._raw is None else self._raw.dump()}  # fmt: skip

    def feed(self, text: str) -> ParsedDelta:
        out = DeltaBuilder()
        if self._raw is not None:
            self._raw.append(text)
            return out.build()
        text = self._marker + text
        at = text.find(CALL)
        if at >= 0:
            self._marker = ""
            self._pre(text[:at], out)
            self._raw = TextBuffer(text[at:])
            return out.build()
        keep = partial_marker_len(text, CALL)
        self._marker = text[len(text) - keep :]
        self._pre(text[: len(text) - keep], out)
        return out.build()

    def _pre(self, text: str, out: DeltaBuilder) -> None:
        """Text before the first <tool_call>: with calls vLLM strips its
        trailing newlines (and a blank one is None)."""
        text = self._pending + text
        if not self._sent and not text.strip():
            self._pending = text
            return
        kept = text.rstrip("\n")
        self._pending = text[len(kept) :]
        if kept:
            self._sent = True
            out.content(kept)

    def finish(self, input_is_none: bool) -> tuple[ParsedDelta, bool]:
        out = DeltaBuilder()
        if self._raw is None:
            out.content(self._pending + self._marker)
            return out.build(), input_is_none
        raw = self._raw.value()
        calls = _calls(raw)
        if calls is None:
            out.content(self._pending + raw)
            return out.build(), input_is_none
        for i, (name, args) in enumerate(calls):
            out.tool_calls.append(ToolCallDelta(i, id=make_tool_call_id(), name=name, arguments=args))
        return out.build(), True


def _calls(raw: str) -> list[tuple[str, str]] | None:
    """``extract_tool_calls``' calls, or None where it falls back to the text."""
    calls = []
    try:
        for body in call_bodies(raw):
            call = json.loads(body)
            name = call.get("name", "")
            if not isinstance(name, str):
                return None  # FunctionCall(name=...) fails validation
            calls.append((name, json.dumps(call.get("arguments", {}), ensure_ascii=False)))
    except (ValueError, AttributeError, TypeError):
        return None
    return calls
