"""``dots`` tool calls: vLLM 0.34's ``DotsToolParser.extract_tool_calls``.

dots writes MiniMax-like XML invokes (or one JSON object) in blocks::

    <dots_function_call>
    <invoke name="search">
    <parameter name="query">weather</parameter>
    </invoke>
    </dots_function_call>

vLLM reads every closed block anywhere in the output (its regular
expressions), each invoke's parameters typed by the request's tool schema,
and keeps only calls to a tool of the request with object arguments.  A
block that fails to decode is skipped; with no call left the output is the
content, else the content is the text before the first
``<dots_function_call>``, stripped.  So the calls are known only at the end:
``held_tools.py`` streams that stripped text and holds the rest.  Its
``supports_required_and_named`` is False: a forced ``tool_choice`` parses
as auto.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .held_tools import Answer, Calls, Extractor, Tools, register

NAME = "dots"
START, END = "<dots_function_call>", "</dots_function_call>"
_BLOCK = re.compile(rf"{re.escape(START)}\s*(.*?)\s*{re.escape(END)}", re.DOTALL)
_INVOKE = re.compile(r"<invoke\s+name\s*=\s*(?P<name>[^>]+)>(?P<body>.*?)</invoke>", re.DOTALL)
_PARAMETER = re.compile(r"<parameter\s+name\s*=\s*(?P<name>[^>]+)>(?P<value>.*?)</parameter>", re.DOTALL)


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _typed(value: str, kind: Any) -> Any:
    """``_convert_param_value``."""
    if value.lower() == "null":
        return None
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    kind = str(kind).lower()
    if kind in ("string", "str", "text"):
        return value
    if kind in ("integer", "int"):
        try:
            return int(value)
        except ValueError:
            return value
    if kind in ("number", "float"):
        try:
            number = float(value)
        except ValueError:
            return value
        return int(number) if number.is_integer() else number
    if kind in ("boolean", "bool"):
        return value.lower() in ("true", "1")
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return value


def _kind(schema: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    """``_resolve_param_type``."""
    if not isinstance(schema, dict) or depth > 10:
        return None
    if "type" in schema:
        return schema["type"]
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _kind(defs.get(ref.rsplit("/", 1)[-1]), defs, depth + 1)
    for keyword in ("anyOf", "oneOf", "allOf"):
        options = schema.get(keyword)
        if not isinstance(options, list):
            continue
        for option in options:
            if isinstance(option, dict) and option.get("type") == "null":
                continue
            found = _kind(option, defs, depth + 1)
            if found is not None:
                return found
    return None


def _schema(name: str, tools: Tools) -> tuple[dict[str, Any], dict[str, Any]]:
    for tool in tools or ():
        function = tool.get("function") or {}
        if function.get("name") != name:
            continue
        schema = function.get("parameters")
        if not isinstance(schema, dict):
            break
        properties, defs = schema.get("properties", {}), schema.get("$defs", {})
        return (properties if isinstance(properties, dict) else {}), (defs if isinstance(defs, dict) else {})
    return {}, {}


def _invoke(match: re.Match[str], tools: Tools) -> dict[str, Any]:
    name = _unquote(match.group("name"))
    properties, defs = _schema(name, tools)
    arguments: dict[str, Any] = {}
    for parameter in _PARAMETER.finditer(match.group("body")):
        key = _unquote(parameter.group("name"))
        kind = (_kind(properties[key], defs) or "string") if key in properties else "string"
        arguments[key] = _typed(parameter.group("value").strip(), kind)
    return {"name": name, "arguments": arguments}


def _block(text: str, tools: Tools) -> list[Any]:
    text = text.strip()
    if text.startswith("<invoke"):
        return [_invoke(m, tools) for m in _INVOKE.finditer(text)]
    parsed = json.loads(text)
    if not isinstance(parsed, dict):
        raise TypeError("not an object")
    return [parsed]


def dots_calls(text: str, tools: Tools) -> Answer:
    start = text.find(START)
    if start == -1:
        return None
    known = {(t.get("function") or {}).get("name") for t in tools or ()}
    calls: Calls = []
    for block in _BLOCK.finditer(text):
        try:
            for parsed in _block(block.group(1), tools):
                name = parsed.get("name")
                if not isinstance(name, str) or name not in known:
                    continue
                arguments = parsed.get("arguments", parsed.get("parameters", {})) or {}
                if isinstance(arguments, dict):
                    calls.append((name, json.dumps(arguments, ensure_ascii=False)))
        except (ValueError, TypeError, RecursionError):
            continue  # vLLM logs it and reads the next block
    if not calls:
        return None
    return text[:start].strip() or None, calls


register(NAME, Extractor(dots_calls, markers=(START,), strip=True, supports_required_and_named=False))
