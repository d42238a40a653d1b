"""MiniMax M3 tool calls: every structural tag behind a ``]<]minimax[>[``
namespace marker (vLLM 0.34 ``parser/minimax_m3.py``, ``MinimaxM3Parser``;
tool name ``minimax_m3``; its reasoning parser is a legacy one,
``parsers/minimax_m3_reasoning.py``).  ::

    ]<]minimax[>[<tool_call>
    ]<]minimax[>[<invoke name="create_order">
    ]<]minimax[>[<user_id>42]<]minimax[>[</user_id>
    ]<]minimax[>[<items>]<]minimax[>[<item>book]<]minimax[>[</item>]<]minimax[>[</items>
    ]<]minimax[>[</invoke>
    ]<]minimax[>[</tool_call>

Each ``<invoke>`` is a call, its name quoted with ``"`` or ``'`` or bare up
to ``>`` (a terminal inside the namespace marker itself: the lexer holds it
until the marker is decided, ``lexer.py``).  The tool block ends the message:
text after it is dropped.  Content whitespace beside calls is kept
(``strip_content_whitespace_with_tools`` off).

The arguments are elements named after the parameter, nested: an element
with child elements is an object (repeated names collect into a list), or an
array where its schema says so; mixed text goes under ``$text``; a scalar is
typed by its schema.  vLLM's ``_convert_args`` reads the schema of the call
that owns the raw arguments, so the converter here writes the element tree
and ``Family.args_rewrite`` types it with the request's tools and that name.
Parsing stops at the first malformed or unterminated element, keeping those
before it.
"""

from __future__ import annotations

import json
from typing import Any

from ..engine.family import Family
from ..engine.grammar import Event, Grammar, State, Transition
from ..engine.registry import register
from ..schema import Tools, coerce_to_schema_type, extract_types_from_schema, find_tool_properties

NAMESPACE = "]<]minimax[>["
ELEMENT_START, ELEMENT_END = f"{NAMESPACE}<", f"{NAMESPACE}</"
TEXT_FIELD = "$text"
MAX_DEPTH = 128

# An element's value: its text, or its [name, value] children in order.
Element = str | list[list[Any]]


def _element(text: str, pos: int, depth: int) -> tuple[str, Element, int] | None:
    """The element whose opening tag starts at ``pos``; None if malformed."""
    if depth > MAX_DEPTH:
        return None
    name_start = pos + len(ELEMENT_START)
    name_end = text.find(">", name_start)
    if name_end <= name_start:
        return None
    name = text[name_start:name_end]
    if name.startswith("/") or not name.strip():
        return None
    close = f"{ELEMENT_END}{name}>"
    pos = name_end + 1
    body: list[str] = []
    children: list[list[Any]] = []
    while True:
        marker = text.find(NAMESPACE, pos)
        if marker < 0:
            return None
        body.append(text[pos:marker])
        if text.startswith(close, marker):
            pos = marker + len(close)
            break
        child = _element(text, marker, depth + 1) if text.startswith(ELEMENT_START, marker) else None
        if child is None:
            return None
        children.append([child[0], child[1]])
        pos = child[2]
    body_text = "".join(body)
    if children and body_text.strip():
        field = TEXT_FIELD
        while any(name == field for name, _ in children):
            field = "$" + field
        children.append([field, body_text])
    return name, (children or body_text), pos


def minimax_m3_elements(raw_args: str) -> str:
    """The converter's first half: the invoke body's parameter elements as a
    JSON list of ``[name, value]`` (typed by ``minimax_m3_arguments``)."""
    params: list[list[Any]] = []
    pos = 0
    while True:
        while pos < len(raw_args) and raw_args[pos].isspace():
            pos += 1
        found = _element(raw_args, pos, 1) if raw_args.startswith(ELEMENT_START, pos) else None
        if found is None:
            return json.dumps(params, ensure_ascii=False)
        params.append([found[0], found[1]])
        pos = found[2]


def _container(schema: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The first ``array`` or ``object`` alternative of ``schema``."""
    types = schema.get("type")
    for kind in ("array", "object"):
        if types == kind or (isinstance(types, list) and kind in types):
            return kind, schema
    if types is None:
        if "items" in schema:
            return "array", schema
        if "properties" in schema or "additionalProperties" in schema:
            return "object", schema
    for key in ("anyOf", "oneOf"):
        for choice in schema.get(key) or ():
            if isinstance(choice, dict) and (found := _container(choice)):
                return found
    return None


def _typed(value: Element, schema: Any) -> Any:
    schema = schema if isinstance(schema, dict) else None
    container = _container(schema) if schema is not None else None
    if isinstance(value, str):
        if schema is None:
            return value
        types = extract_types_from_schema(schema)
        if container is not None and "string" not in types and not value.strip():
            return [] if container[0] == "array" else {}  # an empty list or dict renders as an empty element
        return coerce_to_schema_type(value, types)
    if container is not None and container[0] == "array":
        return [_typed(child, container[1].get("items")) for _, child in value]
    return _object(value, container[1] if container is not None else None)


def _object(elements: list[list[Any]], schema: dict[str, Any] | None) -> dict[str, Any]:
    properties = (schema or {}).get("properties") or {}
    if not isinstance(properties, dict):
        properties = {}  # vLLM fails on it (HTTP 500)
    additional = (schema or {}).get("additionalProperties")
    out: dict[str, Any] = {}
    repeated: set[str] = set()
    for name, element in elements:
        value = _typed(element, properties.get(name, additional))
        if name not in out:
            out[name] = value
        elif name in repeated:
            out[name].append(value)
        else:
            out[name] = [out[name], value]
            repeated.add(name)
    return out


def minimax_m3_arguments(elements_json: str, tools: Tools, name: str | None) -> str:
    """``MinimaxM3Parser._convert_args``: the elements typed with the schema
    of vLLM's call for these raw arguments (``Family.args_rewrite``)."""
    properties = find_tool_properties(tools, (name or "").strip())
    return json.dumps(_object(json.loads(elements_json), {"properties": properties or {}}), ensure_ascii=False)


C, P, N, A, B = State.CONTENT, State.TOOL_PREAMBLE, State.TOOL_NAME, State.TOOL_ARGS, State.TOOL_BETWEEN
_INVOKES = ("INVOKE_PREFIX_DQ", "INVOKE_PREFIX_SQ", "INVOKE_PREFIX_UNQUOTED")

GRAMMAR = Grammar(
    name="minimax_m3",
    terminals={
        "TOOL_START": f"{NAMESPACE}<tool_call>", "TOOL_END": f"{NAMESPACE}</tool_call>",
        "INVOKE_PREFIX_DQ": f'{NAMESPACE}<invoke name="', "INVOKE_PREFIX_SQ": f"{NAMESPACE}<invoke name='",
        "INVOKE_PREFIX_UNQUOTED": f"{NAMESPACE}<invoke name=", "INVOKE_END": f"{NAMESPACE}</invoke>",
        "NAME_END_DQ": '">', "NAME_END_SQ": "'>", "NAME_END_UNQUOTED": ">",
    },
    transitions={
        (C, "TOOL_START"): Transition(P),
        **{(s, t): Transition(N, (Event.TOOL_CALL_START,)) for s in (P, B) for t in _INVOKES},
        **{(N, t): Transition(A) for t in ("NAME_END_DQ", "NAME_END_SQ", "NAME_END_UNQUOTED")},
        (A, "INVOKE_END"): Transition(B, (Event.TOOL_CALL_END,)),  # nested elements are argument text
        (P, "TOOL_END"): Transition(B),  # the block ends the message: text after it is dropped
        (B, "TOOL_END"): Transition(B),
    },
    arg_converter=minimax_m3_elements,
    strip_content_whitespace_with_tools=False,
)

MINIMAX_M3 = register(
    Family(
        name="minimax_m3",
        grammar=GRAMMAR,
        tool_names=("minimax_m3",),
        args_rewrite=minimax_m3_arguments,
    )
)
