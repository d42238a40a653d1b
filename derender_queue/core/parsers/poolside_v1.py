"""``poolside_v1`` reasoning and tool calls: vLLM 0.34's legacy (non-engine)
``PoolsideV1ReasoningParser`` and ``PoolsideV1ToolParser`` (Laguna), as stages.

The reasoning parser is ``deepseek_v3``'s (``deepseek_r1`` with ``thinking``
or ``enable_thinking`` on, vLLM's identity parser otherwise); it changes only
``is_reasoning_end`` on the prompt, which vLLM's streams read and its
non-streaming parse does not, so ours is ``deepseek_v3_reasoning``.  vLLM
refuses a tokenizer without ``<assistant>`` (``factory.py``).

The tool parser is GLM-4's format read by regular expressions over the whole
content, not vLLM's engine::

    <tool_call>get_weather
    <arg_key>city</arg_key>
    <arg_value>Paris</arg_value>
    </tool_call>

vLLM's rules (``extract_tool_calls``): every ``<tool_call>...</tool_call>``
(up to the first end tag) whose text after some ``<tool_call>`` in it is
blank, a name (no newline or ``<``) and blank, then ``<arg_key>...`` or
nothing, is a call (names stripped and not checked, a blank one kept as
``""``); other blocks are skipped.  Each ``<arg_key>k</arg_key>
<arg_value>v</arg_value>`` pair is an argument, its value converted by the
request's schema (``schema_types.convert_value``: kept verbatim where only a
string is admitted, else the stripped text read as JSON, then as a Python
literal, then kept).  With a call the content is the text before the first
``<tool_call>`` (None if blank); without one, or when any conversion or the
arguments' JSON fails (a Python set literal, say), the content is the text as
it came.  ``supports_required_and_named`` is off.

The name and blank-runs are matched by hand (``_call_head``), as vLLM's
pattern reads them, without its backtracking over long blank runs.

So the content before the first ``<tool_call>`` streams as it comes (a blank
prefix held: a call makes it None), and from that tag the text is held until
the end decides.  State: the held text, a blank prefix, a partial tag.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from typing import Any

from .buffer import TextBuffer
from .deltas import DeltaBuilder, ParsedDelta, ToolCallDelta, past_blank
from .families.glm import _ARG_RE
from .ids import make_tool_call_id
from .lexer import partial_marker_len
from .passage import Passage
from .schema import Tools
from .schema_types import allowed_types, convert_value, parameter_types

NAME = "poolside_v1"
ASSISTANT = "<assistant>"  # the tokenizer must have it (PoolsideV1ReasoningParser.__init__)
START, END, ARG_KEY = "<tool_call>", "</tool_call>", "<arg_key>"
_STOPS = frozenset(START[0])

# vLLM's patterns use the `regex` module, whose \s excludes U+001C..U+001F.
_BLANK = re.compile(r"[^\S\x1c-\x1f]*")


def _call_head(inner: str) -> tuple[str, str | None] | None:
    """``func_detail_regex`` (``<tool_call>\\s*([^\\n<]+?)\\s*\\n?\\s*(<arg_key>.*?)?</tool_call>``)
    on one ``<tool_call>``'s text up to the block's end tag: (name, raw
    arguments or None), or None when it does not match there."""
    lt = inner.find("<")
    head, args = (inner, None) if lt < 0 else (inner[:lt], inner[lt:])
    if args is not None and not args.startswith(ARG_KEY):
        return None
    lead = _BLANK.match(head)
    assert lead is not None
    start = lead.end()
    if start == len(head):
        # All blank: the name is the last character that is not a newline.
        at = len(head.rstrip("\n")) - 1
        return None if at < 0 else (head[at].strip(), args)
    end = len(head)
    while end > start and _BLANK.fullmatch(head[end - 1]):
        end -= 1
    name = head[start:end]
    return None if "\n" in name else (name.strip(), args)


def _blocks(text: str) -> list[str]:
    """``<tool_call>.*?</tool_call>``: each block's text between the tags."""
    out, pos = [], 0
    while (at := text.find(START, pos)) >= 0 and (end := text.find(END, at + len(START))) >= 0:
        out.append(text[at + len(START) : end])
        pos = end + len(END)
    return out


def _head_of_block(block: str) -> tuple[str, str | None] | None:
    """``func_detail_regex.search``: the first ``<tool_call>`` in the block
    (its own, then any inner one) where the pattern matches."""
    inner, pos = block, 0
    while True:
        head = _call_head(inner)
        if head is not None:
            return head
        at = block.find(START, pos)
        if at < 0:
            return None
        pos = at + len(START)
        inner = block[pos:]


def _deserialize(value: str) -> Any:
    """``PoolsideV1ToolParser._deserialize``: other errors propagate."""
    value = value.strip()
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        pass
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        pass
    return value


def poolside_calls(text: str, tools: Tools) -> list[tuple[str, str]] | None:
    """The calls vLLM finds in ``text``; None where it fails (the whole text
    is then the content, as without calls)."""
    types = parameter_types(tools)
    calls = []
    try:
        for block in _blocks(text):
            head = _head_of_block(block)
            if head is None:
                continue
            name, raw_args = head
            args: dict[str, Any] = {}
            for m in _ARG_RE.finditer(raw_args or ""):
                key = m.group(1).strip()
                args[key] = convert_value(m.group(2), allowed_types(types, name, key), _deserialize)
            calls.append((name, json.dumps(args, ensure_ascii=False)))
    except Exception:  # vLLM catches everything here and returns the text
        return None
    return calls


class PoolsideV1ToolStage:
    def __init__(self, tools: Tools, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self._tools = tools
        self._part: str = s.get("part", "")  # a partial <tool_call>
        self._ws: str = s.get("ws", "")  # a blank prefix, held
        self._shown: bool = s.get("shown", False)
        held = s.get("held")
        self._held = None if held is None else TextBuffer(held)  # from the first <tool_call>

    def to_state(self) -> dict[str, Any]:
        return {"part": self._part, "ws": self._ws, "shown": self._shown,
                "held": None if self._held is None else self._held.dump()}  # fmt: skip

    def passage(self) -> Passage | None:
        """Content before any ``<tool_call>``, once non-blank content went
        out, when no partial tag is held (passage.py)."""
        if self._held is not None or self._part or not self._shown or self._ws:
            return None
        return Passage("content", _STOPS)

    def feed(self, text: str) -> ParsedDelta:
        out = DeltaBuilder()
        if self._held is not None:
            self._held.append(text)
            return out.build()
        buf = self._part + text
        at = buf.find(START)
        if at >= 0:
            self._part, self._held = "", TextBuffer(buf[at:])
        else:
            at = len(buf) - partial_marker_len(buf, START)
            self._part = buf[at:]
        self._ws, self._shown = past_blank(self._ws, self._shown, buf[:at], out)
        return out.build()

    def finish(self, input_is_none: bool) -> tuple[ParsedDelta, bool]:
        """Flush; also returns whether empty content means None (not "")."""
        out = DeltaBuilder()
        held = self._held.value() if self._held is not None else ""
        calls = poolside_calls(held, self._tools) if held else None
        if not calls:  # no call: the content as it came
            out.content(self._ws + self._part + held)
            return out.build(), input_is_none
        for index, (name, arguments) in enumerate(calls):
            out.tool_calls.append(ToolCallDelta(index, id=make_tool_call_id(), name=name, arguments=arguments))
        return out.build(), True  # a blank prefix (held) makes the content None
