"""``minicpm5`` tool calls: vLLM 0.34's ``MiniCPM5XMLToolParser.extract_tool_calls``.

MiniCPM5 writes XML function blocks anywhere in its output::

    <function name="get_weather"><param name="city">Paris</param></function>

vLLM first undoes tokenizer artefacts (``Ġ``/``Ċ`` for space and newline,
``<functionname=``, ``<paramname=``), then reads every ``<function...</function>``
block: as XML (``xml.etree``; vLLM's environment has no lxml) or, failing
that, with its regular expressions; parameters outside the tool's schema are
skipped (a ``properties``/``arguments`` wrapper object is unwrapped), a
repeated or nameless parameter voids the call, values are kept as text or
decoded (JSON, else a Python literal) as the schema's types admit
(``schema_types.convert_value``), a few alias tool names are mapped to the
request's tools, and a call must name a request tool and carry its required
parameters.  Calls make the content None; without one the output is the
content as it came.  So the whole output is held (``held_tools.py``).
"""

from __future__ import annotations

import ast
import json
import re
import warnings
import xml.etree.ElementTree as ET
from typing import Any

from .held_tools import Answer, Calls, Extractor, Tools, register
from .schema_types import ParameterTypes, convert_value, parameter_types
from .spans import spans

NAME = "minicpm5"
# vLLM's patterns use the `regex` module, whose \s excludes U+001C..U+001F.
_S = r"[^\S\x1c-\x1f]"
_FUNC_NAME = re.compile(rf"<function{_S}+name=['\"]([^'\"]+)['\"][^>]*>")
_PARAM = re.compile(rf"<param{_S}+name=['\"]([^'\"]+)['\"]>([\s\S]*?)</param>", re.DOTALL)
_PARAM_NO_NAME = re.compile(r"<param(?![^>]*\bname=)[^>]*>", re.DOTALL)
_BLOCK = "<function", "</function>"  # vLLM: re.finditer(r"<function.*?</function>", text, re.DOTALL) (spans.py)
_CDATA = ("<![CDATA[", "]]>")

Types = set[str] | None  # JSON types a parameter admits; None: any


# ── arguments ────────────────────────────────────────────────────────


def _decode(text: str) -> tuple[Any, bool]:
    """JSON, else a Python literal; (the text, False) when neither."""
    try:
        try:
            return json.loads(text), True
        except json.JSONDecodeError:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SyntaxWarning)
                return ast.literal_eval(text), True
    except Exception:
        return text, False


class _Call:
    """One block's arguments as vLLM's ``_add_argument`` fills them."""

    def __init__(self, types: dict[str, ParameterTypes], allowed: dict[str, set[str]]) -> None:
        self.types, self.allowed = types, allowed
        self.name: str | None = None
        self.arguments: dict[str, Any] = {}

    def _coerce(self, key: str, value: Any) -> Any:
        props, extra = self.types.get(self.name or "", ({}, None))
        allowed = props.get(key, extra)
        if isinstance(value, str):
            return convert_value(value, allowed, lambda v: _decode(v)[0])
        return convert_value(json.dumps(value, ensure_ascii=False), allowed, lambda _: value)

    def add(self, key: str, text: str, seen: set[str]) -> bool:
        """False when the parameter voids the call."""
        allowed = self.allowed.get(self.name or "", set())
        if key in ("properties", "arguments") and allowed and key not in allowed:
            wrapped, ok = _decode(text)
            if not ok or not isinstance(wrapped, dict):
                return False
            added = False
            for inner, value in wrapped.items():
                if inner not in allowed:
                    continue
                if inner in seen:
                    return False
                seen.add(inner)
                self.arguments[inner] = self._coerce(inner, value)
                added = True
            return added
        if allowed and key not in allowed:
            return True
        if key in seen:
            return False
        seen.add(key)
        self.arguments[key] = self._coerce(key, text)
        return True


def _first(arguments: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if arguments.get(key):
            return arguments[key]
    return arguments.get(keys[-1])


def _alias(name: str, args: dict[str, Any], names: set[str]) -> tuple[str, dict[str, Any]]:
    """``_normalize_alias_tool_call``: MiniCPM5's usual wrong names, mapped."""
    if name in names:
        return name, args
    if name == "get_details_by_phone" and "get_customer_by_phone" in names:
        phone = _first(args, "phone_number", "phone")
        if phone is not None:
            return "get_customer_by_phone", {"phone_number": phone}
    if name == "get_details_by_name" and "get_customer_by_name" in names:
        full_name, dob = _first(args, "full_name", "name"), _first(args, "date_of_birth", "dob")
        mapped: dict[str, Any] = {}
        if full_name is not None:
            mapped["full_name"] = full_name
        if dob is not None:
            mapped["date_of_birth"] = mapped["dob"] = dob
        if mapped:
            return "get_customer_by_name", mapped
    if name in ("get_line_details", "get_line_status", "get_roaming_status") and "get_details_by_id" in names:
        found = _first(args, "line_id", "id")
        if found is not None:
            return "get_details_by_id", {"id": found}
    if name == "get_plan_details" and "get_details_by_id" in names:
        found = _first(args, "plan_id", "id")
        if found is not None:
            return "get_details_by_id", {"id": found}
    if name in ("enable_roaming", "disable_roaming") and "toggle_roaming" in names:
        line = _first(args, "line_id", "id")
        if line is not None:
            return "toggle_roaming", {"line_id": line, "enabled": name == "enable_roaming"}
    if name in ("add_refueled_data", "add_data_to_line") and "refuel_data" in names:
        line = _first(args, "line_id", "id")
        amount = _first(args, "amount_gb", "gb", "gb_amount", "amount")
        mapped = {}
        if "customer_id" in args:
            mapped["customer_id"] = args["customer_id"]
        if line is not None:
            mapped["line_id"] = line
        if amount is not None:
            mapped["amount_gb"] = amount
        if mapped:
            return "refuel_data", mapped
    return name, args


# ── blocks ───────────────────────────────────────────────────────────


def _from_xml(block: str, call: _Call) -> tuple[bool, bool]:
    """The XML reading: (parsed, a parameter voided the call)."""
    root = ET.fromstring(block)  # vLLM's reading (expat 2.4+ refuses entity expansion bombs)
    node = root if root.tag == "function" else root.find("function")
    if node is None:
        return False, False
    call.name = (node.attrib.get("name") or "").strip()
    params = list(node.findall("param"))
    wrapper = node.find("arguments")
    if wrapper is not None and not params:
        params = list(wrapper.findall("param"))
    seen: set[str] = set()
    for param in params:
        key = param.attrib.get("name")
        if not key or not call.add(key, param.text or "", seen):
            call.arguments.clear()
            return bool(call.name), True
    return bool(call.name), False


def _from_regex(block: str, call: _Call) -> tuple[bool, bool]:
    found = _FUNC_NAME.search(block)
    if found:
        call.name = found.group(1).strip()
    invalid = bool(_PARAM_NO_NAME.search(block))
    seen: set[str] = set()
    for param in _PARAM.finditer(block):
        text = param.group(2)
        if text.startswith(_CDATA[0]) and text.endswith(_CDATA[1]):
            text = text[len(_CDATA[0]) : -len(_CDATA[1])]
        else:
            text = text.strip()
        if not call.add(param.group(1).strip(), text, seen):
            invalid = True
            break
    if invalid:
        call.arguments.clear()
    return bool(call.name), invalid


def _block_call(block: str, names: set[str], allowed: dict[str, set[str]], required: dict[str, set[str]],
                types: dict[str, ParameterTypes]) -> tuple[str, dict[str, Any]] | None:  # fmt: skip
    """``_parse_function_block``."""
    call = _Call(types, allowed)
    invalid = False
    try:
        parsed, invalid = _from_xml(block, call)
    except Exception:
        parsed = False
    if not parsed:
        try:
            parsed, voided = _from_regex(block, call)
            invalid = invalid or voided
        except Exception:
            parsed = False
    if not call.name or invalid:
        return None
    name, arguments = _alias(call.name, call.arguments, names)
    if name not in names:
        return None
    needed = required.get(name, set())
    if needed and not needed.issubset(arguments):
        return None
    return (name, arguments) if parsed else None


def _normalize(text: str) -> str:
    if not any(s in text for s in ("\u0120", "\u010a", "<functionname=", "<paramname=")):
        return text
    text = text.replace("\u0120", " ").replace("\u010a", "\n")
    return text.replace("<functionname=", "<function name=").replace("<paramname=", "<param name=")


def _tool_maps(tools: Tools) -> tuple[set[str], dict[str, set[str]], dict[str, set[str]]]:
    allowed: dict[str, set[str]] = {}
    required: dict[str, set[str]] = {}
    for tool in tools or ():
        function = tool.get("function") or {}
        name = function.get("name")
        if not name:
            continue
        params = function.get("parameters") or {}
        allowed[name] = set((params.get("properties", {}) if isinstance(params, dict) else {}).keys())
        needed = params.get("required", []) if isinstance(params, dict) else []
        try:
            required[name] = set(needed)
        except TypeError:
            required[name] = set()
    return set(allowed), allowed, required


def minicpm5_calls(text: str, tools: Tools) -> Answer:
    text = _normalize(text)
    if "<function" not in text:
        return None
    names, allowed, required = _tool_maps(tools)
    types = parameter_types(tools)
    calls: Calls = []
    try:
        for start, end in spans(text, *_BLOCK):
            found = _block_call(text[start:end], names, allowed, required, types)
            if found is not None:
                calls.append((found[0], json.dumps(found[1], ensure_ascii=False)))
    except Exception:  # vLLM: the output as content
        return None
    return (None, calls) if calls else None


register(NAME, Extractor(minicpm5_calls))
