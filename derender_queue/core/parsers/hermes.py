"""``hermes`` tool calls: vLLM's ``Hermes2ProToolParser.extract_tool_calls`` (0.33 and 0.34).

Not an engine family (engine/): vLLM 0.34 keeps Hermes on its legacy parser,
whose all-or-nothing rule below no grammar of terminals expresses, and which
makes a "legacy" composition (``ParserSpec.engine_based``).

vLLM finds every ``<tool_call>BODY</tool_call>`` (a final unclosed one runs
to the end of the text) and JSON-decodes each body.  All bodies must decode
to objects with a string ``name`` and an ``arguments`` key; then the content
is the text before the first ``<tool_call>`` (None if empty or, after the
serving layer's check, whitespace) and everything after it is dropped.  If
any body fails, there are no tool calls and the content is the whole text,
markup included.

That all-or-nothing rule decides only at the end, so from the first
``<tool_call>`` on the raw text is held (``raw``), with the offsets of the
bodies parsed so far.  A body that fails as soon as it closes settles the
outcome early: the held text is released as content and the rest streams
through.  Tool calls are therefore emitted at ``finish``.

State bound: held marker prefix (< 12 chars), a whitespace-only prefix, and
the undecided tool section (``raw`` + one offset pair per call).
"""

from __future__ import annotations

import json
from typing import Any

from .buffer import TextBuffer
from .deltas import DeltaBuilder, ParsedDelta, ToolCallDelta, past_blank
from .ids import make_tool_call_id
from .lexer import partial_marker_len
from .passage import Passage

START = "<tool_call>"
END = "</tool_call>"

_PREFIX, _TOOLS, _FAILED = "prefix", "tools", "failed"


class HermesToolStage:
    """``start``/``end``: the wrapper tags (``longcat`` respells them)."""

    def __init__(self, state: dict[str, Any] | None = None, *, start: str = START, end: str = END) -> None:
        state = state or {}
        self._start, self._end = start, end
        self._phase: str = state.get("phase", _PREFIX)
        self._held: str = state.get("held", "")  # partial "<tool_call>"
        self._ws: str = state.get("ws", "")  # whitespace-only prefix so far
        self._nonws: bool = state.get("nonws", False)
        # From the first <tool_call> on: the raw text, where the next marker
        # may start, the open body's start and the closed bodies (offsets).
        self._raw = TextBuffer(state.get("raw", ""))
        self._scan: int = state.get("scan", 0)
        self._body_start: int | None = state.get("body_start")
        self._bodies: list[list[int]] = [list(b) for b in state.get("bodies", [])]

    def to_state(self) -> dict[str, Any]:
        return {
            "phase": self._phase,
            "held": self._held,
            "ws": self._ws,
            "nonws": self._nonws,
            "raw": self._raw.dump(),
            "scan": self._scan,
            "body_start": self._body_start,
            "bodies": [list(b) for b in self._bodies],
        }

    def feed(self, text: str) -> ParsedDelta:
        out = DeltaBuilder()
        if self._phase == _FAILED:
            out.content(text)
        elif self._phase == _PREFIX:
            self._feed_prefix(text, out)
        else:
            self._feed_tools(text, out)
        return out.build()

    def passage(self) -> Passage | None:
        """Content after a failed section; before any, content once some was
        shown, without the start tag's first character (passage.py)."""
        if self._phase == _FAILED:
            return Passage("content")
        if self._phase == _PREFIX and self._nonws and not self._held:
            return Passage("content", frozenset(self._start[0]))
        return None

    def finish(self, input_is_none: bool) -> tuple[ParsedDelta, bool]:
        """Flush; also returns whether empty content means None (not "")."""
        out = DeltaBuilder()
        if self._phase == _PREFIX:
            # No <tool_call> at all: the content is returned as it was.
            out.content(self._ws + self._held)
            self._ws = self._held = ""
            return out.build(), input_is_none
        if self._phase == _FAILED:
            return out.build(), input_is_none
        raw = self._raw.value()
        if self._body_start is not None:
            self._bodies.append([self._body_start, len(raw)])
        calls = [_decode_call(raw[a:b]) for a, b in self._bodies]
        if any(call is None for call in calls):
            self._fail(out)
            return out.build(), input_is_none
        for index, (name, arguments) in enumerate(calls):  # type: ignore[misc]
            out.tool_calls.append(
                ToolCallDelta(index, id=make_tool_call_id(), name=name, arguments=arguments)
            )
        self._raw.clear()
        self._bodies, self._ws = [], ""
        return out.build(), True

    def _feed_prefix(self, text: str, out: DeltaBuilder) -> None:
        buf = self._held + text
        at = buf.find(self._start)
        if at < 0:
            keep = partial_marker_len(buf, self._start)
            self._held = buf[len(buf) - keep :]
            self._emit_prefix(buf[: len(buf) - keep], out)
            return
        self._held = ""
        self._emit_prefix(buf[:at], out)
        self._phase = _TOOLS
        self._feed_tools(buf[at:], out)

    def _emit_prefix(self, text: str, out: DeltaBuilder) -> None:
        # A whitespace-only prefix becomes None if tool calls follow.
        self._ws, self._nonws = past_blank(self._ws, self._nonws, text, out)

    def _feed_tools(self, text: str, out: DeltaBuilder) -> None:
        # Search only the new text plus the few characters before it that a
        # marker could start in; offsets are absolute positions in raw.
        tail = self._raw.tail(max(len(self._start), len(self._end)) - 1)
        base = len(self._raw) - len(tail)
        self._raw.append(text)
        window = tail + text
        while True:
            marker = self._start if self._body_start is None else self._end
            at = window.find(marker, max(0, self._scan - base))
            if at < 0:
                self._scan = max(self._scan, len(self._raw) - len(marker) + 1)
                return
            self._scan = base + at + len(marker)
            if self._body_start is None:
                self._body_start = self._scan
                continue
            # Read once per call (raw may be in the store: buffer.py).
            body = self._raw.value()[self._body_start : base + at]
            self._bodies.append([self._body_start, base + at])
            self._body_start = None
            if _decode_call(body) is None:
                self._fail(out)
                return

    def _fail(self, out: DeltaBuilder) -> None:
        self._phase = _FAILED
        out.content(self._ws + self._raw.value())
        self._ws, self._bodies, self._body_start = "", [], None
        self._raw.clear()


def _decode_call(body: str) -> tuple[str, str] | None:
    """(name, arguments JSON) as vLLM builds them, or None if vLLM fails."""
    # vLLM catches any Exception here (also RecursionError on deep nesting).
    try:
        call = json.loads(body)
        name, arguments = call["name"], call["arguments"]
        arguments_json = json.dumps(arguments, ensure_ascii=False)
    except Exception:
        return None
    if not isinstance(name, str):
        return None  # pydantic rejects a non-string FunctionCall.name
    return name, arguments_json

