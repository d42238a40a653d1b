"""Tool-schema helpers used by the ``deepseek_v4`` tool parser.

Ports of vLLM 0.33's ``find_tool_properties``, ``extract_types_from_schema``,
``coerce_to_schema_type`` and ``ParserEngine._fix_arg_types``: after DSML
parameters are converted to JSON, string values are re-typed according to the
request's tool schema.
"""

from __future__ import annotations

import json
import math
from typing import Any

Tools = list[dict[str, Any]] | None


def find_tool_properties(tools: Tools, name: object) -> dict[str, Any]:
    """The ``properties`` of the named tool's parameters, or {}."""
    for tool in tools or ():
        function = tool.get("function") or {}
        if function.get("name") == name:
            properties = (function.get("parameters") or {}).get("properties", {})
            # vLLM crashes on a non-dict "properties"; treat it as no schema.
            return properties if isinstance(properties, dict) else {}
    return {}


def fix_arg_types(args_json: str, func_name: str, tools: Tools) -> str:
    """Coerce argument values to the tool schema; unchanged text otherwise."""
    if not tools or not func_name:
        return args_json
    try:
        args = json.loads(args_json)
    except ValueError:
        return args_json
    if not isinstance(args, dict):
        return args_json
    properties = find_tool_properties(tools, func_name)
    if not properties:
        return args_json
    if _coerce_dict(args, properties):
        return json.dumps(args, ensure_ascii=False)
    return args_json


def _coerce_dict(args: dict[str, Any], properties: dict[str, Any]) -> bool:
    changed = False
    for key, value in args.items():
        prop = properties.get(key)
        if not isinstance(prop, dict):
            continue
        coerced, value_changed = _coerce_value(value, prop)
        if value_changed:
            args[key] = coerced
            changed = True
    return changed


def _coerce_value(value: Any, schema: dict[str, Any]) -> tuple[Any, bool]:
    if isinstance(value, str):
        coerced = coerce_to_schema_type(value, extract_types_from_schema(schema))
        return (coerced, True) if coerced is not value else (value, False)
    if isinstance(value, dict):
        nested = schema.get("properties")
        if isinstance(nested, dict):
            return value, _coerce_dict(value, nested)
        return value, False
    if isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, dict):
            return value, False
        changed = False
        for i, item in enumerate(value):
            coerced, item_changed = _coerce_value(item, items)
            if item_changed:
                value[i] = coerced
                changed = True
        return value, changed
    as_str = json.dumps(value, ensure_ascii=False)
    coerced = coerce_to_schema_type(as_str, extract_types_from_schema(schema))
    if type(coerced) is not type(value) or coerced != value:
        return coerced, True
    return value, False


_ENUM_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),  # before int: bool is an int subclass
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


def extract_types_from_schema(schema: Any) -> list[str]:
    """All JSON types a schema allows (``type``, ``enum``, anyOf/oneOf/allOf)."""
    if not isinstance(schema, dict):
        return ["string"]
    types: set[str] = set()
    type_value = schema.get("type")
    if isinstance(type_value, str):
        types.add(type_value)
    elif isinstance(type_value, list):
        types.update(t for t in type_value if isinstance(t, str))
    enum = schema.get("enum")
    if isinstance(enum, list):
        for value in enum:
            if value is None:
                types.add("null")
                continue
            for py_type, json_type in _ENUM_TYPES:
                if isinstance(value, py_type):
                    types.add(json_type)
                    break
    for choice_field in ("anyOf", "oneOf", "allOf"):
        choices = schema.get(choice_field)
        if isinstance(choices, list):
            for choice in choices:
                types.update(extract_types_from_schema(choice))
    # vLLM returns list(set); only membership is used downstream.
    return sorted(types) if types else ["string"]


_TYPE_ALIASES: dict[str, str] = {
    "str": "string", "text": "string", "varchar": "string", "char": "string",
    "enum": "string", "int": "integer", "int32": "integer", "int64": "integer",
    "uint": "integer", "uint32": "integer", "uint64": "integer",
    "long": "integer", "short": "integer", "unsigned": "integer",
    "float": "number", "float32": "number", "float64": "number",
    "double": "number", "bool": "boolean", "dict": "object", "arr": "array",
    "list": "array", "sequence": "array",
}  # fmt: skip

_PRIORITY = ("null", "integer", "number", "boolean", "object", "array", "string")


def coerce_to_schema_type(value: str, schema_types: list[str]) -> Any:
    """Best-effort conversion of a raw string to the first fitting type."""
    allowed = {_TYPE_ALIASES.get(k, k) for t in schema_types for k in [t.strip().lower()]}
    for candidate in _PRIORITY:
        if candidate not in allowed:
            continue
        result = _try_coerce(value, candidate)
        if result is not _NO:
            return result
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    return parsed if _is_json_finite(parsed) else value


_NO = object()


def _try_coerce(value: str, candidate: str) -> Any:
    if candidate == "null":
        return None if value.lower() == "null" else _NO
    if candidate == "string":
        return value
    if candidate == "integer":
        return _int_or_no(value)
    if candidate == "number":
        as_int = _int_or_no(value)
        if as_int is not _NO:
            return as_int
        try:
            val = float(value)
        except ValueError:
            return _NO
        if not math.isfinite(val):
            return _NO
        return val if val != int(val) else int(val)
    if candidate == "boolean":
        lowered = value.lower().strip()
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0"):
            return False
        return _NO
    # object / array
    try:
        parsed = json.loads(value)
    except ValueError:
        return _NO
    return parsed if _is_json_finite(parsed) else _NO


def _int_or_no(value: str) -> Any:
    try:
        return int(value)
    except ValueError:
        return _NO


def _is_json_finite(obj: Any) -> bool:
    try:
        json.dumps(obj, allow_nan=False)
        return True
    except (ValueError, TypeError):
        return False
