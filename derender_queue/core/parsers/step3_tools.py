"""``step3`` tool calls: vLLM 0.34's ``Step3ToolParser.extract_tool_calls``
(not an engine parser).  ::

    <｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="get_weather">
    <steptml:parameter name="city">Paris</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>

vLLM splits the text at the first ``<｜tool_calls_begin｜>`` and the first
``<｜tool_calls_end｜>`` after it; each ``<｜tool_call_begin｜>`` part of the
block up to its ``<｜tool_call_end｜>`` whose type is ``function`` and whose
invoke has a name is a call (parameter values stripped, then re-typed by the
tool's schema).  With a call the content is the text around the block,
stripped (None if empty); without one (or without both markers) it is the
text as it came, markup included.

So content before the block streams as it comes, but for its trailing
whitespace (held until more text) and a whitespace-only start (held until
text or the end); a leading whitespace sent with the first text stays in a
stream where a call then strips it (the "held content" exception of
docs/parsers.md; the non-streaming parse holds it).  The block itself is
held until it closes, then the calls are sent, or the block as content.
State: the phase, a partial marker, the held whitespace and the open block.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .buffer import TextBuffer
from .deltas import DeltaBuilder, ParsedDelta, ToolCallDelta
from .ids import make_tool_call_id
from .lexer import partial_marker_len
from .schema import Tools, coerce_to_schema_type, extract_types_from_schema

NAME = "step3"
BEGIN, END = "<｜tool_calls_begin｜>", "<｜tool_calls_end｜>"
CALL_BEGIN, CALL_END, SEP = "<｜tool_call_begin｜>", "<｜tool_call_end｜>", "<｜tool_sep｜>"
_INVOKE_RE = re.compile(r'<steptml:invoke name="([^"]+)">')
_PARAM_RE = re.compile(r'<steptml:parameter name="([^"]+)">(.*?)</steptml:parameter>', re.DOTALL)

_PRE, _BLOCK, _CALLED, _RAW = "pre", "block", "called", "raw"


def parse_block(block: str, tools: Tools) -> list[tuple[str, str]]:
    """The calls of one tool block, as ``extract_tool_calls`` reads them."""
    calls = []
    for part in block.split(CALL_BEGIN):
        if not part or CALL_END not in part:
            continue
        call = part.split(CALL_END, 1)[0]
        if SEP not in call:
            continue
        kind, invoke = call.split(SEP, 1)
        m = _INVOKE_RE.search(invoke)
        if kind.strip() != "function" or m is None:
            continue
        params: dict[str, Any] = {k: v.strip() for k, v in _PARAM_RE.findall(invoke)}
        calls.append((m.group(1), json.dumps(_cast(m.group(1), params, tools), ensure_ascii=False)))
    return calls


def _cast(name: str, params: dict[str, Any], tools: Tools) -> dict[str, Any]:
    """``Step3ToolParser._cast_arguments``: the first tool of that name."""
    for tool in tools or ():
        function = tool.get("function") or {}
        if function.get("name") == name:
            properties = (function.get("parameters") or {}).get("properties", {})
            for key, value in params.items():
                params[key] = coerce_to_schema_type(value.strip(), extract_types_from_schema(properties.get(key)))
            break
    return params


class Step3ToolStage:
    def __init__(self, tools: Tools, *, whole: bool = False, state: dict[str, Any] | None = None) -> None:
        self._tools = tools
        self._whole = whole  # the non-streaming parse: nothing is sent before the outcome is known
        s = state or {}
        self._phase: str = s.get("phase", _PRE)
        self._marker: str = s.get("marker", "")  # a partial BEGIN (pre) or END (block)
        self._hold = TextBuffer(s.get("hold", ""))  # undecided content text
        self._sent: bool = s.get("sent", False)  # content with non-space text was sent
        self._block = TextBuffer(s.get("block", ""))

    def to_state(self) -> dict[str, Any]:
        return {"phase": self._phase, "marker": self._marker, "hold": self._hold.dump(), "sent": self._sent,
                "block": self._block.dump()}  # fmt: skip

    def feed(self, text: str) -> ParsedDelta:
        out = DeltaBuilder()
        self._feed(text, out)
        return out.build()

    def finish(self, input_is_none: bool) -> tuple[ParsedDelta, bool]:
        """Flush; also returns whether empty content means None (not "")."""
        out = DeltaBuilder()
        if self._phase == _CALLED:
            self._hold.clear()  # trailing whitespace: stripped
            return out.build(), True
        if self._phase == _BLOCK:
            out.content(self._hold.value() + BEGIN + self._block.value() + self._marker)
        else:
            out.content(self._hold.value() + self._marker)
        self._hold.clear()
        self._block.clear()
        self._marker = ""
        return out.build(), input_is_none

    def _feed(self, text: str, out: DeltaBuilder) -> None:
        if self._phase == _PRE:
            text = self._marker + text
            at = text.find(BEGIN)
            if at < 0:
                keep = partial_marker_len(text, BEGIN)
                self._marker = text[len(text) - keep :]
                self._pre(text[: len(text) - keep], out)
                return
            self._marker = ""
            self._pre(text[:at], out)
            self._phase = _BLOCK
            text = text[at + len(BEGIN) :]
        if self._phase == _BLOCK:
            window = self._block.tail(len(END) - 1) + text
            at = window.find(END)
            self._block.append(text)
            if at < 0:
                return
            full = self._block.value()
            cut = len(full) - len(window) + at
            self._close(full[:cut], out)
            text = full[cut + len(END) :]
        if self._phase == _CALLED:
            self._stripped(text, out)
        else:
            out.content(text)

    def _pre(self, text: str, out: DeltaBuilder) -> None:
        """Content before the block: its outcome is not known yet."""
        combined = self._hold.value() + text
        if self._whole or (not self._sent and not combined.strip()):
            self._hold = TextBuffer(combined)
            return
        self._sent = True  # leading whitespace goes too (the "held content" exception)
        kept = combined.rstrip()
        out.content(kept)
        self._hold = TextBuffer(combined[len(kept) :])

    def _close(self, block: str, out: DeltaBuilder) -> None:
        self._block.clear()
        calls = parse_block(block, self._tools)
        if not calls:
            self._phase = _RAW
            out.content(self._hold.value() + BEGIN + block + END)
            self._hold.clear()
            return
        self._phase = _CALLED
        for i, (name, args) in enumerate(calls):
            out.tool_calls.append(ToolCallDelta(i, id=make_tool_call_id(), name=name, arguments=args))
        self._stripped("", out)

    def _stripped(self, text: str, out: DeltaBuilder) -> None:
        """Content once a call was made: ``(pre + post).strip()``."""
        combined = self._hold.value() + text
        if not self._sent:
            combined = combined.lstrip()
            if not combined:
                self._hold.clear()
                return
            self._sent = True
        kept = combined.rstrip()
        out.content(kept)
        self._hold = TextBuffer(combined[len(kept) :])
