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
open tool region's body (held until it closes, as vLLM parses it then), the
tail of the open region's text (``_closer_rest``), a few offsets.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .deltas import ParsedDelta, ToolCallDelta
from .ids import make_tool_call_id
from .request import ParseRequest

HF, BEAM = "hf", "beam"
NAMES = (HF, BEAM)
THINKING, CONTENT, TOOLS = "thinking", "content", "tool_calls"

# ── content parsers (vLLM's chat_parsing/content_parsers.py) ─────────────────

_LAX_OPEN, _LAX_CLOSE = "\x01", "\x02"
_PLACEHOLDER = re.compile(r"\{(\w+(?:\.\w+)*)\}")


def _text(text: str, args: Mapping[str, Any]) -> str:
    return text.strip() if args.get("strip", True) else text


def _json(text: str, args: Mapping[str, Any]) -> Any:
    delims = args.get("string_delims", [])
    if delims and (_LAX_OPEN in text or _LAX_CLOSE in text):
        raise ValueError("json: input contains reserved sentinel characters")
    working, captured = text, []

    def keep(m: re.Match[str]) -> str:
        captured.append(m.group(1))
        return f"{_LAX_OPEN}{len(captured) - 1}{_LAX_CLOSE}"

    for open_d, close_d in delims:
        working = re.sub(re.escape(open_d) + r"(.*?)" + re.escape(close_d), keep, working, flags=re.DOTALL)
    if args.get("unquoted_keys", False):
        working = re.sub(r"(?<=[{,])(\w+):", r'"\1":', working)
    for i, s in enumerate(captured):
        working = working.replace(f"{_LAX_OPEN}{i}{_LAX_CLOSE}", json.dumps(s))
    try:
        return json.loads(working)
    except json.JSONDecodeError as e:
        if args.get("allow_non_json"):
            return _text(text, args)
        raise ValueError("json: not JSON") from e


def _sub_parse(raw: str, value_parser: Mapping[str, Any] | None) -> Any:
    if value_parser is None:
        return raw
    return parse_content(raw, value_parser.get("name", "text"), value_parser.get("args", {}))


def _xml_inline(text: str, args: Mapping[str, Any]) -> dict[str, Any]:
    pattern = args.get("tag_pattern")
    if pattern is None:
        raise ValueError("xml-inline: 'tag_pattern' content_arg is required")
    out: dict[str, Any] = {}
    for m in re.finditer(pattern, text, flags=re.DOTALL):
        groups = m.groupdict()
        key = groups.get("key")
        if key is None:
            raise ValueError("xml-inline: tag_pattern must have a named group 'key'")
        value = _sub_parse(groups.get("value", ""), args.get("value_parser"))
        if key in out and args.get("merge_duplicates", False):
            if not isinstance(out[key], list):
                out[key] = [out[key]]
            out[key].append(value)
        else:
            out[key] = value
    return out


def _kv_lines(text: str, args: Mapping[str, Any]) -> dict[str, Any]:
    kv_sep = args.get("kv_sep", ":")
    out: dict[str, Any] = {}
    for line in text.split(args.get("line_sep", "\n")):
        line = _text(line, args)
        if not line or kv_sep not in line:
            continue
        k, v = line.split(kv_sep, 1)
        out[_text(k, args)] = _sub_parse(_text(v, args), args.get("value_parser"))
    return out


CONTENT_PARSERS: dict[str, Callable[[str, Mapping[str, Any]], Any]] = {
    "text": _text,
    "int": lambda text, args: int(_text(text, args)),
    "float": lambda text, args: float(_text(text, args)),
    "bool": lambda text, args: _text(text, args).lower() in ("true", "1"),
    "json": _json,
    "xml-inline": _xml_inline,
    "kv-lines": _kv_lines,
}


def parse_content(text: str, name: str, args: Mapping[str, Any]) -> Any:
    return CONTENT_PARSERS[name](text, args)


def _apply_transform(transform: Any, scope: Mapping[str, Any]) -> Any:
    if isinstance(transform, dict):
        return {k: _apply_transform(v, scope) for k, v in transform.items()}
    if isinstance(transform, list):
        return [_apply_transform(v, scope) for v in transform]
    if not isinstance(transform, str) or not (whole := _PLACEHOLDER.fullmatch(transform)):
        return transform
    root, *keys = whole.group(1).split(".")
    if root not in scope:
        raise KeyError(root)
    value = scope[root]
    for key in keys:
        if not isinstance(value, dict):
            raise ValueError(f"transform cannot index into {type(value).__name__}")
        if key not in value:
            raise ValueError(f"transform is missing key {key!r}")
        value = value[key]
    return value


def _check_transform(scope: str, transform: Any) -> None:
    if isinstance(transform, dict):
        transform = list(transform.values())
    if isinstance(transform, list):
        for v in transform:
            _check_transform(scope, v)
    elif isinstance(transform, str) and _PLACEHOLDER.search(transform) and not _PLACEHOLDER.fullmatch(transform):
        raise ValueError(f"{scope}: transform string {transform!r} mixes a placeholder with literal text")


# ── the template (vLLM's response_templates.py and its serving checks) ───────


@dataclass(frozen=True)
class Field:
    name: str
    opens: tuple[str, ...]  # () for the implicit field
    closes: tuple[str, ...]
    content: str
    args: Mapping[str, Any]
    join: str | None
    transform: Any
    transform_each: bool


@dataclass(frozen=True)
class Template:
    fields: dict[str, Field]
    implicit: str | None
    anchors: tuple[str, ...]
    longest: int


_TEMPLATE_KEYS = {"version", "defaults", "fields", "start_anchor", "start_anchor_pattern"}
_FIELD_KEYS = {"open", "open_pattern", "close", "close_pattern", "content", "content_args", "repeats", "join",
               "optional", "transform", "transform_each"}  # fmt: skip


def _literals(scope: str, spec: Mapping[str, Any], key: str) -> tuple[str, ...]:
    if f"{key}_pattern" in spec:
        raise ValueError(f"{scope}: '{key}_pattern' (a regular-expression anchor) is not served, only literals")
    raw = spec.get(key)
    if raw is None:
        return ()
    literals = [raw] if isinstance(raw, str) else raw
    if not isinstance(literals, list) or not literals or not all(isinstance(s, str) and s for s in literals):
        raise ValueError(f"{scope}: '{key}' must be a non-empty string or list of them")
    literals = list(dict.fromkeys(literals))
    if any(a != b and a.startswith(b) for a in literals for b in literals):
        raise ValueError(f"{scope}: '{key}' literals that are prefixes of one another are not served")
    return tuple(literals)


def _field(name: str, spec: Any) -> Field:
    scope = f"Field '{name}'"
    if not isinstance(spec, dict):
        raise ValueError(f"{scope} must be a dict")
    if unknown := set(spec) - _FIELD_KEYS:
        raise ValueError(f"{scope}: unknown keys {sorted(unknown)}")
    content = spec.get("content", "text")
    if content not in CONTENT_PARSERS:
        raise ValueError(f"{scope}: unknown content parser {content!r}")
    join, transform = spec.get("join"), spec.get("transform")
    if join is not None and (not isinstance(join, str) or not spec.get("repeats", False)):
        raise ValueError(f"{scope}: 'join' must be a string, with 'repeats': true")
    transform_each = spec.get("transform_each", False)
    if not isinstance(transform_each, bool) or (transform_each and transform is None):
        raise ValueError(f"{scope}: transform_each must be a bool, with a transform")
    _check_transform(scope, transform)
    if name in (THINKING, CONTENT) and (content != "text" or transform is not None or join is not None):
        raise ValueError(f"response_template field {name!r} uses semantics that cannot be streamed")
    return Field(name, _literals(scope, spec, "open"), _literals(scope, spec, "close"), content,
                 spec.get("content_args", {}), join, transform, transform_each)  # fmt: skip


def load_template(spec: Any) -> Template:
    """vLLM's ``load_response_template`` + ``validate_response_template_for_serving``
    + ``_streaming_template``, for literal anchors; ValueError where vLLM
    refuses the template or this stage does not serve it."""
    if not isinstance(spec, dict):
        raise ValueError("response_template must be a dict")
    if spec.get("version", 1) != 1 or set(spec) - _TEMPLATE_KEYS:
        raise ValueError("response_template: unsupported version or unknown keys")
    defaults, raw = spec.get("defaults", {}), spec.get("fields", {})
    if not isinstance(defaults, dict) or not isinstance(raw, dict) or not raw:
        raise ValueError("response_template: defaults must be a dict and fields a non-empty dict")
    if unsupported := (set(raw) - {THINKING, CONTENT, TOOLS}) | (set(defaults) - {"role"}):
        raise ValueError(f"response_template contains unsupported semantic fields: {sorted(unsupported)}")
    raw = copy.deepcopy(raw)
    if CONTENT not in raw and all(isinstance(f, dict) and ("open" in f or "open_pattern" in f) for f in raw.values()):
        raw[CONTENT] = {}
    fields = {name: _field(name, f) for name, f in raw.items()}
    implicit = [name for name, f in fields.items() if not f.opens]
    if len(implicit) > 1:
        raise ValueError("response_template: at most one field may omit 'open'")
    anchors = _literals("response_template", spec, "start_anchor")
    if not anchors:
        raise ValueError("response_template must define 'start_anchor' or 'start_anchor_pattern'.")
    longest = max(len(s) for f in fields.values() for s in (*f.opens, *f.closes, *anchors))
    return Template(fields, implicit[0] if implicit else None, anchors, longest)


def check_parsers(template: Any, reasoning_parser: str | None, tool_parser: str | None) -> Template:
    """vLLM's ``validate_tokenizer_response_template`` (the server refuses to start)."""
    if template is None:
        raise ValueError("the hf/beam parsers require `response_template` metadata in the tokenizer configuration")
    loaded = load_template(template)
    if reasoning_parser and THINKING not in loaded.fields:
        raise ValueError(f"--reasoning-parser {reasoning_parser} requires a response_template with a thinking field")
    if tool_parser and TOOLS not in loaded.fields:
        raise ValueError(f"--tool-call-parser {tool_parser} requires a response_template with a tool_calls field")
    return loaded


def check_combination(reasoning_parser: str | None, tool_parser: str | None) -> bool:
    """Whether the names select a response-template parser; vLLM refuses one beside any other."""
    names = {n for n in (reasoning_parser, tool_parser) if n is not None}
    if not names & set(NAMES):
        return False
    if len(names) > 1:
        raise ValueError(f"--reasoning-parser {reasoning_parser} and --tool-call-parser {tool_parser} "
                         "cannot be combined")  # fmt: skip
    return True


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
        return {"c": self._cur, "o": self._opened, "b": self._body, "u": self._buf, "p": self._pos,
                "x": self._prefix_len, "n": self._calls, "f": self._fed}  # fmt: skip

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
        text = self._body[-self._t.longest :] + self._buf
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
        keep_all = self._cur == TOOLS and self._parse_tools
        body = self._body + text
        self._body = body if keep_all else body[-self._t.longest :]
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
                    value = [_apply_transform(field.transform, item) for item in value]
                else:
                    value = _apply_transform(field.transform, {"content": value})
            if self._params:
                value = _coerce_calls(value, self._params)
            if field.join is not None and not isinstance(value, str):
                return []
        except (KeyError, TypeError, ValueError):
            return []
        return _calls(value)
