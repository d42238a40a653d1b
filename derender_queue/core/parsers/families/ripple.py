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
from .llama import member_object  # vLLM's extract_json_member_object, as granite.py reads it


def _framed(marker: str, before: bool = True, after: bool = True) -> tuple[str, ...]:
    """``ripple._framed``: the marker with its optional newlines, longest first."""
    heads = ("\n", "") if before else ("",)
    tails = ("\n", "") if after else ("",)
    return tuple(sorted({h + marker + t for h in heads for t in tails}, key=len, reverse=True))


def ripple_arguments(raw_args: str) -> str:
    """``_ripple_arg_converter(raw_args, partial=False)``."""
    args = member_object(raw_args, "arguments")
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
