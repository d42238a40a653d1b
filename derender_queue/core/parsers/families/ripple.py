"""Ricursive Ripple: optional ``<think>`` reasoning and Hermes-style JSON
calls, markers framed by optional newlines (vLLM 0.34 ``parser/ripple.py``).  ::

    <think>
    ...reasoning...
    </think>
    ...content...
    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

Names: reasoning and tools ``ripple``.  The output starts as content (the
model decides per turn whether to think; ``RippleParser`` drops the chat
template kwargs), and each marker has spellings with and without the
template's framing newline, which belong to the marker.  Data, except the
argument converter: vLLM's ``extract_json_member_object``, the verbatim
text of the ``arguments`` object (not re-serialized), ``{}`` without one,
an error (then the JSON fallback) when it is not an object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..engine.family import Family
from ..engine.grammar import Event, Grammar, State, Transition
from ..engine.registry import register

_JSON_WS = " \t\r\n"


def _framed(marker: str, before: bool = True, after: bool = True) -> tuple[str, ...]:
    """``ripple._framed``: the marker with its optional newlines, longest first."""
    heads = ("\n", "") if before else ("",)
    tails = ("\n", "") if after else ("",)
    return tuple(sorted({h + marker + t for h in heads for t in tails}, key=len, reverse=True))


def _object_end(raw: str, start: int) -> int | None:
    """``scan_json_object_end``: past the object opening at ``start``, or None."""
    depth, in_string, escape = 0, False, False
    for i in range(start, len(raw)):
        ch = raw[i]
        if escape:
            escape = False
        elif in_string:
            escape, in_string = ch == "\\", ch != '"'
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def json_member_object(raw: str, key: str) -> str | None:
    """vLLM's ``extract_json_member_object``: the raw text of the top-level
    object-valued member ``key`` (an unterminated one runs to the end), None
    when it has not started; ValueError when it is not an object."""
    depth, in_string, escape, string_start = 0, False, False, -1
    last_string: str | None = None
    for i, ch in enumerate(raw):
        if escape:
            escape = False
        elif in_string:
            if ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
                if depth == 1:
                    last_string = raw[string_start + 1 : i]
        elif ch == '"':
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


def ripple_arguments(raw_args: str) -> str:
    """``_ripple_arg_converter(raw_args, partial=False)``."""
    args = json_member_object(raw_args, "arguments")
    return "{}" if args is None else args


def _never(kwargs: Mapping[str, Any]) -> bool:
    return False  # the output starts as content; <think> opens reasoning


C, R, A = State.CONTENT, State.REASONING, State.TOOL_ARGS
GRAMMAR = Grammar(
    name="ripple",
    terminals={
        "THINK_START": _framed("<think>", before=False),
        "THINK_END": _framed("</think>"),
        "TOOL_START": _framed("<tool_call>"),
        "TOOL_END": _framed("</tool_call>", after=False),
    },
    transitions={
        (C, "THINK_START"): Transition(R, (Event.REASONING_START,)),
        (R, "THINK_START"): Transition(R),
        (R, "THINK_END"): Transition(C, (Event.REASONING_END,)),
        (C, "THINK_END"): Transition(C),
        (R, "TOOL_START"): Transition(A, (Event.REASONING_END, Event.TOOL_CALL_START)),
        (C, "TOOL_START"): Transition(A, (Event.TOOL_CALL_START,)),
        (A, "TOOL_END"): Transition(C, (Event.TOOL_CALL_END,)),
    },
    initial_state=C,
    arg_converter=ripple_arguments,
    strip_content_whitespace_with_tools=False,
)

RIPPLE = register(Family(name="ripple", grammar=GRAMMAR, reasoning_names=("ripple",), tool_names=("ripple",),
                         thinking=_never))
