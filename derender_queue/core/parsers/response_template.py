"""vLLM 0.34's response-template parsers: ``hf`` (``ResponseTemplateParser``)
and ``beam`` (``BeamParser``), reasoning and tools.

Not an engine family: the format is no fixed grammar but the tokenizer's
``response_template`` metadata (``tokenizer_config.json``), which declares
fields (``thinking``, ``content``, ``tool_calls``) with open and close
anchors, a content parser (``text``, ``json``, ``xml-inline``, ``kv-lines``,
...) and a transform that shapes a parsed call.  vLLM parses the output with
one region parser for both passes (``parser/chat_parsing/``), from the last
start anchor of the decoded prompt on, and routes its events: thinking chunks
are reasoning, content chunks content, a closed tool region's value the calls
(a region that fails to parse is dropped; with tool parsing off the whole
region, delimiters included, is content).  So this is one stage for both
passes, as harmony's.  ``beam`` parses exactly as ``hf``; it differs only in
the structural tag it puts on a request, which a derender never applies.
vLLM refuses either name beside any other parser, ``hf`` beside ``beam``, a
tokenizer without a template, a reasoning parser without a ``thinking`` field
and a tool parser without a ``tool_calls`` field.

vLLM's non-streaming answer is its streaming parser fed the whole output at
once; its scan (``ResponseParser._scan``) holds a possible delimiter at the
buffer's end with the ``regex`` module's partial matching.  Served here:
templates whose anchors are all literal strings, none a prefix of another in
its list; for those the partial match is "the buffer's end is a proper prefix
of a literal" and a complete literal at the end is final, so the same scan
runs on the held text only.  One difference, on purpose: ``regex`` reports a
later complete match over an earlier partial one (held text ``\n</thi`` +
``nk>`` commits ``</think>`` though ``\n</think>\n\n`` may still come), so
vLLM's own stream can split a delimiter its non-streaming answer reads whole;
this scan holds from the earlier partial, so every chunking folds to the
non-streaming answer (the two readings meet at the end of the output, where
nothing is partial).  A template with an ``*_pattern`` anchor (a
regular expression: partial matching needs ``regex``, not a dependency here)
or prefix-overlapping literals is refused when the model loads.

State: the open region, the held text (shorter than the longest anchor), the
open tool region's body (held until it closes, as vLLM parses it then), a
few offsets (both 0 once past the prompt's text).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .deltas import ParsedDelta, ToolCallDelta
from .ids import make_tool_call_id
from .passage import Passage
from .request import ParseRequest
from .response_template_spec import THINKING, TOOLS, Field, Template, apply_transform, parse_content

# ── tool values (vLLM's ResponseParser._coerce_tool_calls, _to_tool_calls) ───


def _schema_types(schema: Any) -> tuple[str, ...]:
    if not isinstance(schema, dict):
        return ()
    declared = schema.get("type")
    types = [declared] if isinstance(declared, str) else []
    if isinstance(declared, list):
        types.extend(t for t in declared if isinstance(t, str))
    for union in ("anyOf", "oneOf"):
        for choice in schema.get(union) or []:
            types.extend(_schema_types(choice))
    if schema.get("nullable") and "null" not in types:
        types.append("null")
    return tuple(types)


def _coerce_one(raw: str, type_name: str) -> tuple[bool, Any]:
    if type_name == "integer":
        try:
            return True, int(raw)
        except ValueError:
            number = float(raw)
            return (True, int(number)) if number.is_integer() else (False, None)
    if type_name == "number":
        number = float(raw)
        if number != number or number in (float("inf"), float("-inf")):
            return False, None
        return True, int(number) if number.is_integer() and "." not in raw else number
    if type_name == "boolean" and raw.strip().lower() in ("true", "1", "false", "0"):
        return True, raw.strip().lower() in ("true", "1")
    if type_name == "null" and raw.strip() in ("null", "None"):
        return True, None
    if type_name in ("object", "array"):
        decoded = json.loads(raw)
        if isinstance(decoded, dict if type_name == "object" else list):
            return True, decoded
    return False, None


def _coerce(raw: str, types: tuple[str, ...]) -> Any:
    for type_name in types:
        try:
            ok, value = _coerce_one(raw, type_name)
        except ValueError:
            continue
        if ok:
            return value
    return raw


def _coerce_calls(value: Any, params: Mapping[str, Mapping[str, Any]]) -> Any:
    if isinstance(value, list):
        return [_coerce_calls(item, params) for item in value]
    fn = value.get("function") if isinstance(value, dict) else None
    if not isinstance(fn, dict):
        return value
    name, arguments = fn.get("name"), fn.get("arguments")
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return value
    if properties := params.get(name):
        for key, argument in arguments.items():
            if key not in properties or not (types := _schema_types(properties[key])):
                continue
            if isinstance(argument, str):
                arguments[key] = _coerce(argument, types)
            elif isinstance(argument, list) and "array" not in types:
                arguments[key] = [_coerce(item, types) if isinstance(item, str) else item for item in argument]
    return value


def _tool_params(tools: Sequence[Mapping[str, Any]] | None) -> dict[str, Mapping[str, Any]]:
    params: dict[str, Mapping[str, Any]] = {}
    for tool in tools or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            parameters = fn.get("parameters")
            properties = parameters.get("properties") if isinstance(parameters, dict) else None
            params[fn["name"]] = properties if isinstance(properties, dict) else {}
    return params


def _calls(value: Any) -> list[tuple[str, str]]:
    calls = []
    for item in value if isinstance(value, list) else [value]:
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict):
            return []
        name, arguments = function.get("name"), function.get("arguments")
        if not isinstance(name, str) or not name or arguments is None:
            return []
        calls.append((name, arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)))
    return calls


def _partial(buf: str, literals: tuple[str, ...], lo: int, hi: int) -> int | None:
    """The first position in [lo, hi) from which ``buf``'s end is a proper prefix of a literal."""
    n = len(buf)
    for i in range(lo, hi):
        if any(len(lit) > n - i and lit.startswith(buf[i:]) for lit in literals):
            return i
    return None


# ── the stage ────────────────────────────────────────────────────────────────


class ResponseTemplateStage:
    """Both passes of ``hf``/``beam`` (vLLM's ``_ResponseStream`` over ``ResponseParser``)."""

    def __init__(
        self,
        template: Template,
        request: ParseRequest,
        *,
        reasoning: bool,
        tools: bool,
        decode: Callable[[list[int]], str] | None,
        state: dict[str, Any] | None = None,
    ) -> None:
        self._t = template
        self._reasoning = reasoning
        self._parse_tools = tools and request.tool_choice != "none"
        self._params = _tool_params(request.tools)
        self._out: ParsedDelta | None = None
        if state is not None:
            self._cur: str | None = state["c"]
            self._opened: bool = state["o"]
            self._body: str = state["b"]
            self._buf: str = state["u"]
            self._pos: int = state["p"]
            self._prefix_len: int = state["x"]
            self._calls: int = state["n"]
            self._fed: bool = state["f"]
            return
        self._cur, self._opened, self._body, self._buf = template.implicit, False, "", ""
        self._pos = self._prefix_len = self._calls = 0
        self._fed = False
        ids = request.prompt_token_ids
        prefix = decode(list(ids)) if ids and decode is not None else ""
        if prefix:
            self._buf = self._truncate(prefix)
            self._process(eos=False)  # the prompt's events: tracked, not routed
            self._prefix_len = self._pos + len(self._buf)

    def to_state(self) -> dict[str, Any]:
        # Past the prompt's text the offsets matter only as pos - prefix_len
        # (<= 0 then, every new text routed): both 0, so plain text leaves
        # the state as it was.
        pos, prefix_len = (0, 0) if self._pos >= self._prefix_len else (self._pos, self._prefix_len)
        return {"c": self._cur, "o": self._opened, "b": self._body, "u": self._buf, "p": pos,
                "x": prefix_len, "n": self._calls, "f": self._fed}  # fmt: skip

    def passage(self) -> Passage | None:
        """Text of an open region other than a parsed tool region, past the
        prompt, while nothing is held: its field's text (passage.py).  The
        stops are the first characters of the delimiters ``_scan`` watches."""
        cur = self._cur
        if cur is None or self._buf or not self._fed or not self._opened or self._pos < self._prefix_len:
            return None
        if cur == TOOLS and self._parse_tools:
            return None  # the body is held until the region closes
        watch = self._watch()
        stops = frozenset(lit[0] for kind, f in watch for lit in (f.opens if kind == 0 else f.closes))
        return Passage("reasoning" if cur == THINKING and self._reasoning else "content", stops)

    def feed(self, text: str) -> ParsedDelta:
        out = self._out = ParsedDelta()
        if text:
            self._fed = True
            self._buf += text
        self._process(eos=False)
        self._out = None
        return out

    def finish(self) -> ParsedDelta:
        out = self._out = ParsedDelta()
        if self._fed:
            self._buf += self._closer_rest()
            self._process(eos=False)
            self._process(eos=True)
        self._out = None
        return out

    # vLLM's ResponseTemplate.truncate_past_last_anchor
    def _truncate(self, prefix: str) -> str:
        last = None
        for m in re.finditer("|".join(re.escape(s) for s in sorted(self._t.anchors, key=len, reverse=True)), prefix):
            last = m.end()
        return prefix if last is None else prefix[last:]

    def _closer_rest(self) -> str:
        if not self._opened or self._cur is None:
            return ""
        text = self._buf  # (see _accumulate)
        for closer in self._t.fields[self._cur].closes:
            for anchor in self._t.anchors:
                if not closer.endswith(anchor) or closer == anchor:
                    continue
                for cut in range(len(closer) - 1, len(closer) - len(anchor) - 1, -1):
                    if text.endswith(closer[:cut]):
                        return closer[cut:]
        return ""

    def _watch(self) -> list[tuple[int, Field]]:
        fields = self._t.fields
        if self._cur is not None and self._cur != self._t.implicit:
            field = fields[self._cur]
            return [(1, field)] if field.closes else []
        watch = [(0, f) for f in fields.values() if f.opens]
        if self._t.implicit is not None and fields[self._t.implicit].closes:
            watch.append((1, fields[self._t.implicit]))
        return watch

    def _scan(self, eos: bool) -> tuple[tuple[int, Field, int, str] | None, int]:
        """vLLM's ``_scan`` on literal delimiters: (kind, field, start, literal) of
        the earliest committable one, and where the held text starts."""
        buf, n = self._buf, len(self._buf)
        best: tuple[int, Field, int, str] | None = None
        best_key: tuple[int, int, int, str] | None = None
        hold = n
        for kind, field in self._watch():
            literals = field.opens if kind == 0 else field.closes
            start, literal = n + 1, ""
            for lit in literals:
                i = buf.find(lit)
                if 0 <= i < start:
                    start, literal = i, lit
            if not eos:
                partial = _partial(buf, literals, max(0, n - self._t.longest), min(start, n))
                if partial is not None:
                    hold = min(hold, partial)
                    continue
            if start > n:
                continue
            key = (start, -len(literal), kind, field.name)
            if best_key is None or key < best_key:
                best_key, best = key, (kind, field, start, literal)
        if best is not None and best[2] >= hold:
            best = None
        return best, hold

    def _process(self, eos: bool) -> None:
        while True:
            best, hold = self._scan(eos)
            if best is not None:
                kind, field, start, literal = best
                if start:
                    self._accumulate(self._buf[:start])
                at = self._pos + start
                self._buf = self._buf[start + len(literal) :]
                self._pos = at + len(literal)
                if kind == 0:
                    self._close(at, "")
                    self._open(field, at, literal)
                else:
                    self._close(at, literal)
                continue
            if eos:
                if self._buf:
                    self._accumulate(self._buf)
                    self._pos += len(self._buf)
                    self._buf = ""
                self._close(self._pos, "")
                return
            if hold:
                self._accumulate(self._buf[:hold])
                self._pos += hold
                self._buf = self._buf[hold:]
            return

    def _span(self, start: int, literal: str) -> None:
        """A tool region's delimiter, as content when tool parsing is off."""
        text = literal[max(0, self._prefix_len - start) :]
        if self._out is not None and text and not self._parse_tools:
            self._content(text)

    def _content(self, text: str) -> None:
        assert self._out is not None
        self._out.content = (self._out.content or "") + text

    def _accumulate(self, text: str) -> None:
        if not text or self._cur is None:
            return
        self._opened = True
        # Only a parsed tool region keeps its body.  _closer_rest's text ending
        # in a proper prefix of a closer starts in the held text: released
        # text never starts such a suffix (_scan holds from it).
        if self._cur == TOOLS and self._parse_tools:
            self._body += text
        text = text[max(0, self._prefix_len - self._pos) :]
        if not text or self._out is None:
            return
        if self._cur == TOOLS:
            if not self._parse_tools:
                self._content(text)
        elif self._cur == THINKING and self._reasoning:
            self._out.reasoning = (self._out.reasoning or "") + text
        else:
            self._content(text)

    def _open(self, field: Field, start: int, literal: str) -> None:
        self._cur, self._body, self._opened = field.name, "", True
        if field.name == TOOLS:
            self._span(start, literal)

    def _close(self, start: int, literal: str) -> None:
        cur, opened, body = self._cur, self._opened, self._body
        self._cur, self._body, self._opened = self._t.implicit, "", False
        if cur != TOOLS or not opened:
            return
        if not self._parse_tools:
            self._span(start, literal)
            return
        if self._out is None:
            return  # a call the prompt closed is the prompt's
        for name, arguments in self._value(self._t.fields[TOOLS], body):
            self._out.tool_calls.append(ToolCallDelta(self._calls, id=make_tool_call_id(), name=name,
                                                      arguments=arguments))  # fmt: skip
            self._calls += 1

    def _value(self, field: Field, body: str) -> list[tuple[str, str]]:
        """vLLM's ``process_field`` + coercion; a region that fails to parse makes no call."""
        try:
            value = parse_content(body, field.content, field.args)
            if field.transform is not None:
                if field.transform_each:
                    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
                        return []
                    value = [apply_transform(field.transform, item) for item in value]
                else:
                    value = apply_transform(field.transform, {"content": value})
            if self._params:
                value = _coerce_calls(value, self._params)
            if field.join is not None and not isinstance(value, str):
                return []
        except (KeyError, TypeError, ValueError):
            return []
        return _calls(value)
