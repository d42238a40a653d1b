"""The JSON types a tool parameter's schema admits, and the conversion of a
raw argument text by them: vLLM 0.34's ``tool_parsers/schema_types.py``
(``parameter_types``, ``convert_value``), which its XML-style legacy tool
parsers (``poolside_v1``) use where the engine families use ``schema.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .schema import Tools

# Per tool: the types of each listed parameter and of any other one
# (additionalProperties); None admits any type.
ParameterTypes = tuple[dict[str, set[str] | None], set[str] | None]


def json_type(value: Any) -> str:
    """The JSON Schema type name of a decoded value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"


def _ref_types(ref: str, root: dict[str, Any], refs: dict[str, set[str] | None]) -> set[str] | None:
    """A local ``$ref``'s types, memoized (a ref being resolved admits any)."""
    if ref not in refs:
        refs[ref] = None
        node: Any = root if ref.startswith("#/") else None
        for part in ref[2:].split("/"):
            if isinstance(node, dict):
                node = node.get(part.replace("~1", "/").replace("~0", "~"))
        refs[ref] = schema_types(node, root, refs)
    return refs[ref]


def schema_types(schema: Any, root: dict[str, Any], refs: dict[str, set[str] | None]) -> set[str] | None:
    """The types ``schema`` admits (``type``, ``const``, ``enum``, ``$ref``,
    ``anyOf``/``oneOf`` as a union, ``allOf`` as an intersection), None for
    any; a number admits an integer."""
    if not isinstance(schema, dict):
        return None
    constraints: list[set[str] | None] = []
    declared = schema.get("type")
    if isinstance(declared, str):
        constraints.append({declared})
    elif isinstance(declared, list):
        constraints.append({t for t in declared if isinstance(t, str)})
    if "const" in schema:
        constraints.append({json_type(schema["const"])})
    if isinstance(schema.get("enum"), list):
        constraints.append({json_type(v) for v in schema["enum"]})
    ref = schema.get("$ref")
    if isinstance(ref, str):
        constraints.append(_ref_types(ref, root, refs))
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            union: set[str] = set()
            for branch in branches:
                types = schema_types(branch, root, refs)
                if types is None:
                    break  # a branch that admits anything makes the union do so
                union |= types
            else:
                constraints.append(union)
    if isinstance(schema.get("allOf"), list):
        constraints.extend(schema_types(s, root, refs) for s in schema["allOf"])
    known = [t | {"integer"} if "number" in t else t for t in constraints if t is not None]
    return set.intersection(*known) if known else None


def parameter_types(tools: Tools) -> dict[str, ParameterTypes]:
    """Tool name -> its parameters' types (a later tool of the same name wins)."""
    out: dict[str, ParameterTypes] = {}
    for tool in tools or ():
        function = tool.get("function") or tool
        if not isinstance(function, dict):
            continue
        name, parameters = function.get("name"), function.get("parameters")
        if not name or not isinstance(parameters, dict):
            continue
        properties = parameters.get("properties")
        if not isinstance(properties, dict):
            properties = {}
        refs: dict[str, set[str] | None] = {}
        out[name] = (
            {k: schema_types(s, parameters, refs) for k, s in properties.items()},
            schema_types(parameters.get("additionalProperties"), parameters, refs),
        )
    return out


def allowed_types(types: dict[str, ParameterTypes], tool: str, param: str) -> set[str] | None:
    """The types one argument admits; None when unconstrained (no such tool)."""
    props, extra = types.get(tool, ({}, None))
    return props.get(param, extra)


def convert_value(raw: str, allowed: set[str] | None, decode: Callable[[str], Any]) -> Any:
    """The raw text if the schema admits only a string, else ``decode(raw)``
    when it admits the decoded value's type (or anything), else the text."""
    if allowed == {"string"}:
        return raw
    decoded = decode(raw)
    if allowed is None or "string" not in allowed:
        return decoded
    return decoded if json_type(decoded) in allowed - {"string"} else raw
