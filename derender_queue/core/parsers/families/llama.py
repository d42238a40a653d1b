"""Llama 3.1+ JSON tool calls (vLLM 0.34 ``parser/llama_json.py``, tools
``llama3_json`` and ``llama4_json``, one engine).  ::

    <|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "search", ...}
    {"name": "get_weather", "arguments": {"city": "Paris"}}

The body after ``<|python_tag|>`` (or an output that starts with ``{``) is a
``;``-separated sequence of JSON objects, one call each (the engine's JSON
collection); the first other character makes the rest content.  The code
here is vLLM's and says so: the converter (the ``"arguments"`` or
``"parameters"`` member's text, verbatim) and the validator: an input that
starts with the marker or ``{`` must be nothing but complete call objects
(each with a name and arguments or parameters), separated by ``;``, maybe
ending in an end-of-output token; anything else makes the whole input the
content.
"""

from __future__ import annotations

import json

from ..engine.collection import SEMICOLON
from ..engine.family import Family
from ..engine.grammar import Grammar, State, Transition
from ..engine.registry import register

TOOL_START = "<|python_tag|>"
OUTPUT_END_TOKENS = ("<|eom_id|>", "<|eot_id|>", "<|end_of_text|>")
_JSON_WS = " \t\r\n"


def _only_end_token_left(text: str, position: int) -> bool:
    return any(text.startswith(t, position) and not text[position + len(t) :].strip() for t in OUTPUT_END_TOKENS)


def validate_tool_output(text: str) -> bool | None:
    """vLLM's ``_validate_complete_tool_output``."""
    if text.startswith(TOOL_START):
        text = text[len(TOOL_START) :]
    elif not text.startswith("{"):
        return None
    decoder = json.JSONDecoder()
    position, found = 0, False
    while position < len(text):
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return found
        try:
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            return False
        if not isinstance(value, dict) or "name" not in value or ("arguments" not in value
                                                                  and "parameters" not in value):
            return False
        found, position = True, end
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text) or _only_end_token_left(text, position):
            return True
        if text[position] != ";":
            return False
        position += 1
    return found


def _object_end(raw: str, start: int) -> int | None:
    """``vllm.parser.utils.scan_json_object_end``."""
    depth, in_string, escape = 0, False, False
    for i in range(start, len(raw)):
        ch = raw[i]
        if escape:
            escape = False
        elif in_string:
            if ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def member_object(raw: str, key: str) -> str | None:
    """``vllm.parser.utils.extract_json_member_object``: the verbatim text of
    the top-level member ``key``'s object value (ValueError if not an object)."""
    depth, in_string, escape, string_start = 0, False, False, -1
    last_string: str | None = None
    for i, ch in enumerate(raw):
        if escape:
            escape = False
            continue
        if in_string:
            if ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
                if depth == 1:
                    last_string = raw[string_start + 1 : i]
            continue
        if ch == '"':
            in_string, string_start = True, i
        elif ch == ":" and depth == 1 and last_string == key:
            start = i + 1
            while start < len(raw) and raw[start] in _JSON_WS:
                start += 1
            if start >= len(raw):
                return None
            if raw[start] != "{":
                raise ValueError(f"member {key!r} must be a JSON object")
            end = _object_end(raw, start)
            return raw[start:] if end is None else raw[start:end]
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return None


def llama_arguments(raw_args: str) -> str:
    """``_llama_arg_converter(raw, partial=False)``."""
    args = member_object(raw_args, "arguments")
    if args is None:
        args = member_object(raw_args, "parameters")
    return "{}" if args is None else args


GRAMMAR = Grammar(
    name="llama_json",
    terminals={"TOOL_START": TOOL_START},
    transitions={(State.CONTENT, "TOOL_START"): Transition(State.TOOL_ARGS)},
    arg_converter=llama_arguments,
    tool_call_body_collection=SEMICOLON,
    complete_tool_call_validator=validate_tool_output,
    validated_prefixes=(TOOL_START, "{"),
    bare_json_tool_start=TOOL_START,  # "Some Llama templates omit TOOL_START and begin directly with JSON."
)

LLAMA_JSON = register(Family(name="llama_json", grammar=GRAMMAR, tool_names=("llama3_json", "llama4_json")))
