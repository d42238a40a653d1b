"""DSML invoke bodies -> OpenAI ``arguments`` JSON (vLLM 0.34 ``parser/deepseek_v4.py``).

Pure functions over one finished ``<｜DSML｜invoke>`` body: the parameter
converter, the wrapper-unwrapping, and the JSON fallback used when the invoke
has no name.  Patterns follow vLLM's ``regex``-module patterns; stdlib ``re``
``\\s`` also matches U+001C..U+001F, which ``regex`` does not, hence ``_WS``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .schema import Tools, find_tool_properties

DSML = "｜DSML｜"
_WS = r"[^\S\x1c-\x1f]"
_START = re.escape(f"<{DSML}parameter")
_CLOSE = re.escape(f"</{DSML}parameter>")
# A parameter ends at its closing tag or where the next parameter begins.
_PARAM_RE = re.compile(
    rf'{_START}{_WS}+name="([^"]+)"(?:{_WS}+string="([^"]*)")?{_WS}*>'
    rf"(.*?)(?:{_CLOSE}|(?={_START}{_WS}+name=))",
    re.DOTALL,
)
# ParserEngine._try_extract_name: a name spelled inside nameless invoke args.
NAME_IN_ARGS_RE = re.compile(rf'"name"{_WS}*:{_WS}*"([^"]*)"')

WRAPPER_KEYS = ("arguments", "input")


def param_pattern(param_start: str, param_close: str) -> re.Pattern[str]:
    """``_param_patterns``' complete-parameter regex for another DSML dialect
    (DeepSeek V4.1 spells ``<｜DSML｜ parameter``)."""
    start, close = re.escape(param_start), re.escape(param_close)
    return re.compile(
        rf'{start}{_WS}+name="([^"]+)"(?:{_WS}+string="([^"]*)")?{_WS}*>(.*?)(?:{close}|(?={start}{_WS}+name=))',
        re.DOTALL,
    )


def parse_params(raw_args: str, pattern: re.Pattern[str] = _PARAM_RE) -> dict[str, Any]:
    """``_dsml_arg_converter`` before serialization (complete body)."""
    params: dict[str, Any] = {}
    for m in pattern.finditer(raw_args):
        name, is_str, value = m.group(1), m.group(2), m.group(3)
        if is_str == "true":
            params[name] = value
            continue
        # string="false" or no attribute: JSON if it parses, else the text.
        try:
            params[name] = json.loads(value)
        except ValueError:
            params[name] = value
    return params


def is_wrapper_shaped(params: dict[str, Any]) -> bool:
    """Whether ``unwrap_wrapper_args`` could change these arguments."""
    return len(params) == 1 and next(iter(params)) in WRAPPER_KEYS


def unwrap_wrapper_args(args_json: str, tools: Tools, func_name: str | None) -> str:
    """Replace ``{"arguments": {...}}`` / ``{"input": ...}`` by the inner
    object when the tool schema has no such key and the inner keys fit."""
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
    allowed = set(properties)
    for wrapper in WRAPPER_KEYS:
        if set(args) != {wrapper} or wrapper in allowed:
            continue
        inner = args[wrapper]
        if isinstance(inner, str):
            try:
                inner = json.loads(inner)
            except ValueError:
                return args_json
        if isinstance(inner, dict) and set(inner).issubset(allowed):
            return json.dumps(inner, ensure_ascii=False)
    return args_json


def name_and_args_from_json(raw_body: str, keys: tuple[str, ...] = ("arguments", "parameters")) -> tuple[Any, str]:
    """``ParserEngine._extract_name_and_args``: a nameless body as JSON
    (``keys``: ``_extract_args_value``'s).

    The name may be any JSON value; callers keep only non-empty strings.
    """
    raw_body = raw_body.strip()
    try:
        parsed = json.loads(raw_body)
    except ValueError:
        return "", raw_body
    if not isinstance(parsed, dict):
        return "", raw_body
    name = parsed.get("name", "")
    for key in keys:
        if key in parsed:
            value = parsed[key]
            return name, value if isinstance(value, str) else json.dumps(
                value, ensure_ascii=False
            )
    rest = {k: v for k, v in parsed.items() if k != "name"}
    return name, json.dumps(rest, ensure_ascii=False)


def name_from_args(raw_args: str) -> str:
    """The name ``_try_extract_name`` finds in the args, or ""."""
    m = NAME_IN_ARGS_RE.search(raw_args)
    return m.group(1) if m else ""
