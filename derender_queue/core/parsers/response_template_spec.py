"""A tokenizer's ``response_template`` (vLLM 0.34's ``parser/chat_parsing/``):
its fields, anchors, content parsers and transforms, read and checked when a
model loads, and which parser names may use one (``hf``, ``beam``).  The stage
that parses output with it is ``response_template.py``.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

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


def apply_transform(transform: Any, scope: Mapping[str, Any]) -> Any:
    if isinstance(transform, dict):
        return {k: apply_transform(v, scope) for k, v in transform.items()}
    if isinstance(transform, list):
        return [apply_transform(v, scope) for v in transform]
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
