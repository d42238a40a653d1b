"""``k2_horizon`` reasoning and tools: vLLM 0.34's legacy K2 Horizon classes
(``K2HorizonReasoningParser``, ``K2HorizonToolParser``), as stages.

Not an engine family: vLLM parses these with string searches and regular
expressions over the whole text, with all-or-nothing validation::

    <ifm|think>...</ifm|think>          (effort medium: think_fast, low: think_faster)
    <ifm|tool_calls><ifm|tool_call>get_weather
    <ifm|arg_key>city</ifm|arg_key><ifm|arg_value>Paris</ifm|arg_value>
    </ifm|tool_call></ifm|tool_calls>

Reasoning: a leading start tag is dropped; the text before the first end
tag is reasoning, or, with no end tag at all, the text before the first
``<ifm|tool_calls>`` (else none: the output is content).  So reasoning is
held until its end tag comes; without one it waits for the end of the
output, as R1's markerless reasoning does.

Tools (``tool_call_format``: ``xml``, ``xml_typed`` or ``json``): only the
first ``<ifm|tool_calls>`` group counts and only once it is closed; it must
hold nothing but well-formed calls of known, exactly named tools, else no
call is made and the output is content as it is.  The content around the
group streams (a blank one is None); the group is held until it closes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .buffer import TextBuffer
from .deltas import DeltaBuilder, ParsedDelta, ToolCallDelta, past_blank
from .ids import make_tool_call_id
from .lexer import partial_marker_len
from .passage import Passage, holding
from .schema import Tools, coerce_to_schema_type, extract_types_from_schema, find_tool_properties

K2_HORIZON = "k2_horizon"
EFFORT_TAGS = {"high": ("<ifm|think>", "</ifm|think>"), "medium": ("<ifm|think_fast>", "</ifm|think_fast>"),
               "low": ("<ifm|think_faster>", "</ifm|think_faster>")}  # fmt: skip
GROUP, GROUP_END = "<ifm|tool_calls>", "</ifm|tool_calls>"
CALL, CALL_END = "<ifm|tool_call>", "</ifm|tool_call>"
KEY, KEY_END, TYPE, TYPE_END, VALUE, VALUE_END = ("<ifm|arg_key>", "</ifm|arg_key>", "<ifm|arg_type>",
                                                  "</ifm|arg_type>", "<ifm|arg_value>", "</ifm|arg_value>")  # fmt: skip
_ARG_MARKERS = (KEY, KEY_END, TYPE, TYPE_END, VALUE, VALUE_END)
_WS = r"[^\S\x1c-\x1f]"  # the regex module's \s
_CALL_RE = re.compile(re.escape(CALL) + r"(.*?)" + re.escape(CALL_END), re.DOTALL)
_ARG_RE = re.compile(
    rf"{re.escape(KEY)}(.*?){re.escape(KEY_END)}{_WS}*(?:{re.escape(TYPE)}(.*?){re.escape(TYPE_END)}{_WS}*)?"
    rf"{re.escape(VALUE)}(.*?){re.escape(VALUE_END)}",
    re.DOTALL,
)
FORMATS = ("json", "xml", "xml_typed")


def effort_tags(chat_template_kwargs: Mapping[str, Any]) -> tuple[str, str]:
    """The reasoning tags for the request's effort (vLLM refuses other values;
    here they read as ``high``)."""
    return EFFORT_TAGS.get(chat_template_kwargs.get("reasoning_effort", "high"), EFFORT_TAGS["high"])


class K2HorizonReasoningStage:
    # vLLM returns reasoning "" (not None) when there is none, content None when empty.
    reasoning_nullable = False
    content_nullable = True

    def __init__(self, chat_template_kwargs: Mapping[str, Any], state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self._start, self._end = effort_tags(chat_template_kwargs)
        self._phase: str = s.get("phase", "start")  # start -> pre -> content
        self._buf = TextBuffer(s.get("buf", ""))

    def to_state(self) -> dict[str, Any]:
        return {"phase": self._phase, "buf": self._buf.dump()}

    def passage(self) -> Passage | None:
        if self._phase == "content":
            return Passage("content")
        if self._phase == "pre":
            return holding("buf", frozenset(self._end[0]), (self._end,))
        return None

    def feed(self, text: str) -> tuple[str, str]:
        if self._phase == "content":
            return "", text
        if self._phase == "start":
            buf = self._buf.value() + text
            if self._start.startswith(buf) and buf != self._start:
                self._buf = TextBuffer(buf)
                return "", ""
            self._phase, self._buf = "pre", TextBuffer()
            return self._pre(buf.removeprefix(self._start))
        return self._pre(text)

    def _pre(self, text: str) -> tuple[str, str]:
        window = self._buf.tail(len(self._end) - 1) + text
        at = window.find(self._end)
        if at < 0:
            self._buf.append(text)
            return "", ""
        before = len(self._buf) - (len(window) - len(text))
        reasoning = self._buf.value()[:before] + window[:at]
        self._phase, self._buf = "content", TextBuffer()
        return reasoning, window[at + len(self._end) :]

    def finish(self) -> tuple[str, str]:
        if self._phase == "content":
            return "", ""
        text = self._buf.value()
        if self._phase == "start":
            text = text.removeprefix(self._start)
        self._buf = TextBuffer()
        at = text.find(GROUP)
        return (text[:at], text[at:]) if at >= 0 else ("", text)


class K2HorizonToolStage:
    """``extract_tool_calls`` as a stage; ``none`` for tool_choice "none"
    (no calls, the content as it is or None), ``engine_based`` when vLLM's
    composition counts this parser as an engine (no reasoning parser): then
    a turn without calls also gives None for blank content."""

    def __init__(self, request: Any, *, none: bool, engine_based: bool, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self._request = request
        self._none = none
        self._engine_based = engine_based
        self._phase: str = s.get("phase", "prefix")  # prefix -> group -> after
        self._partial: str = s.get("part", "")  # a partial marker not yet sent
        self._ws: str = s.get("ws", "")  # blank content so far, held
        self._nonws: bool = s.get("nonws", False)
        self._group = TextBuffer(s.get("group", ""))  # from <ifm|tool_calls> on
        self._called: bool = s.get("called", False)

    def to_state(self) -> dict[str, Any]:
        return {"phase": self._phase, "part": self._partial, "ws": self._ws, "nonws": self._nonws,
                "group": self._group.dump(), "called": self._called}  # fmt: skip

    def passage(self) -> Passage | None:
        """Content once non-blank content went out (before the group: without
        its first character); the group itself is held to its end."""
        if self._phase == "group" and not self._none:
            return holding("group", frozenset(GROUP_END[0]), (GROUP_END,))
        if not self._nonws or self._partial:
            return None
        if self._none or self._phase == "after":
            return Passage("content")
        return Passage("content", frozenset(GROUP[0]))

    def feed(self, text: str) -> ParsedDelta:
        out = DeltaBuilder()
        if self._none or self._phase == "after":
            self._emit(text, out)
        elif self._phase == "prefix":
            self._prefix(text, out)
        else:
            self._in_group(text, out)
        return out.build()

    def _prefix(self, text: str, out: DeltaBuilder) -> None:
        buf = self._partial + text
        at = buf.find(GROUP)
        if at < 0:
            keep = partial_marker_len(buf, GROUP)
            self._partial = buf[len(buf) - keep :]
            self._emit(buf[: len(buf) - keep], out)
            return
        self._partial, self._phase = "", "group"
        self._emit(buf[:at], out)
        self._in_group(buf[at:], out)

    def _in_group(self, text: str, out: DeltaBuilder) -> None:
        window = self._group.tail(len(GROUP_END) - 1) + text
        # The group's end is searched after its opener.
        start = max(0, len(GROUP) - (len(self._group) - (len(window) - len(text))))
        at = window.find(GROUP_END, start)
        if at < 0:
            self._group.append(text)
            return
        cut = at + len(GROUP_END) - (len(window) - len(text))
        self._group.append(text[:cut])
        group = self._group.value()
        self._group, self._phase = TextBuffer(), "after"
        calls = self._calls(group[len(GROUP) : -len(GROUP_END)])
        if calls is None:
            self._emit(group, out)
        else:
            self._called = True
            for index, (name, arguments) in enumerate(calls):
                out.tool_calls.append(ToolCallDelta(index, id=make_tool_call_id(), name=name, arguments=arguments))
        self._emit(text[cut:], out)

    def _emit(self, text: str, out: DeltaBuilder) -> None:
        self._ws, self._nonws = past_blank(self._ws, self._nonws, text, out)

    def finish(self, input_is_none: bool) -> tuple[ParsedDelta, bool]:
        """Flush; also returns whether empty content means None (not "")."""
        out = DeltaBuilder()
        self._emit(self._partial + self._group.value(), out)  # an unclosed group is content
        self._partial, self._group = "", TextBuffer()
        if self._nonws:
            return out.build(), input_is_none
        if self._called or self._none or self._engine_based:
            return out.build(), True  # blank content is None
        out.content(self._ws)
        return out.build(), input_is_none

    def _calls(self, body: str) -> list[tuple[str, str]] | None:
        matches = list(_CALL_RE.finditer(body))
        if not matches or _CALL_RE.sub("", body).strip():
            return None
        kwargs = self._request.chat_template_kwargs or {}
        fmt = kwargs.get("tool_call_format", "xml")
        fmt = fmt if fmt in FORMATS else "xml"  # vLLM refuses other values
        try:
            return [_make_call(*_parse_call(m.group(1), self._request, fmt)) for m in matches]
        except (TypeError, ValueError):  # json.JSONDecodeError is a ValueError
            return None


def _make_call(name: str, arguments: dict[str, Any]) -> tuple[str, str]:
    return name, json.dumps(arguments, ensure_ascii=False, allow_nan=False)


def _tool_exists(tools: Tools, name: str) -> bool:
    return any((tool.get("function") or {}).get("name") == name for tool in tools or ())


def _validate_name(name: Any, request: Any) -> str:
    if not isinstance(name, str) or not name or any(char.isspace() for char in name):
        raise ValueError("IFM tool call has an invalid function name.")
    if request.tools and not _tool_exists(request.tools, name):
        raise ValueError(f"Unknown IFM tool name: {name}.")
    if request.named_tool is not None and name != request.named_tool:
        raise ValueError(f"Unexpected IFM tool name: {name}.")
    return name


def _parse_call(body: str, request: Any, fmt: str) -> tuple[str, dict[str, Any]]:
    if fmt == "json":
        return _parse_json_call(body, request)
    return _parse_xml_call(body, request, fmt)


def _parse_json_call(body: str, request: Any) -> tuple[str, dict[str, Any]]:
    raw_call = json.loads(body.strip())
    if not isinstance(raw_call, dict):
        raise ValueError("IFM JSON tool call must be an object.")
    name = _validate_name(raw_call.get("name"), request)
    arguments = raw_call.get("arguments", {})
    if not isinstance(arguments, dict):
        raise ValueError("IFM JSON tool-call arguments must be an object.")
    properties = find_tool_properties(request.tools, name)
    return name, {k: _coerce_json_value(v, properties.get(k)) for k, v in arguments.items()}


def _coerce_json_value(value: Any, schema: Any) -> Any:
    if not isinstance(schema, dict):
        return value
    raw = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, allow_nan=False)
    return coerce_to_schema_type(raw, extract_types_from_schema(schema))


def _parse_xml_call(body: str, request: Any, fmt: str) -> tuple[str, dict[str, Any]]:
    first = body.find(KEY)
    if first == -1:
        if any(marker in body for marker in _ARG_MARKERS):
            raise ValueError("Malformed IFM XML argument tags.")
        return _validate_name(body.strip(), request), {}
    name = _validate_name(body[:first].strip(), request)
    properties = find_tool_properties(request.tools, name)
    arguments: dict[str, Any] = {}
    position = first
    for m in _ARG_RE.finditer(body, first):
        if body[position : m.start()].strip():
            raise ValueError("Malformed IFM XML argument tags.")
        key = m.group(1).strip()
        if not key or key in arguments:
            raise ValueError("IFM XML argument is missing a name or repeated.")
        explicit = m.group(2).strip() if m.group(2) is not None else None
        if (fmt == "xml" and explicit is not None) or (fmt == "xml_typed" and not explicit):
            raise ValueError("IFM XML argument type tag unexpected or missing.")
        arguments[key] = _coerce_xml_value(m.group(3), properties.get(key), explicit)
        position = m.end()
    if position == first or body[position:].strip():
        raise ValueError("Malformed IFM XML argument tags.")
    return name, arguments


def _coerce_xml_value(value: str, schema: Any, explicit: str | None) -> Any:
    base = explicit.split("[", 1)[0].strip().lower() if explicit else None
    targets = extract_types_from_schema(schema)
    if isinstance(schema, dict):
        if base in targets and len(set(targets)) > 1:
            targets = [base]
    elif base == "any":
        return value
    elif base:
        targets = [base]
    return coerce_to_schema_type(value if "string" in targets else value.strip(), targets)
