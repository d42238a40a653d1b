"""Granite 3.0/3.1 JSON-array tool calls (vLLM 0.34 ``parser/granite.py``, tools ``granite``).  ::

    <|tool_call|>[{"name": "get_weather", "arguments": {"city": "SF"}}]   # 3.0: a special token
    <tool_call>[{"name": "get_weather", "arguments": {"city": "SF"}}]     # 3.1: plain text

The marker switches into the tool region; the engine's JSON-array
collection makes one call per element (``]`` ends the array, anything else
there is content), each element's name read from its JSON.  The converter,
vLLM's ``_granite_arg_converter``, is the ``"arguments"`` member's object
text, verbatim (Llama's helper; ``{}`` without one).  The reasoning parser
``granite`` ("Here is my thought process:") is a separate, legacy parser.
"""

from __future__ import annotations

from ..engine.collection import JSON_ARRAY
from ..engine.family import Family
from ..engine.grammar import Grammar, State, Transition
from ..engine.registry import register
from .llama import member_object


def granite_arguments(raw_args: str) -> str:
    """``_granite_arg_converter(raw, partial=False)``."""
    span = member_object(raw_args, "arguments")
    return "{}" if span is None else span


GRAMMAR = Grammar(
    name="granite",
    terminals={"TOOL_TOKEN": "<|tool_call|>", "TOOL_STRING": "<tool_call>"},
    transitions={
        (State.CONTENT, "TOOL_TOKEN"): Transition(State.TOOL_ARGS),
        (State.CONTENT, "TOOL_STRING"): Transition(State.TOOL_ARGS),
    },
    arg_converter=granite_arguments,
    tool_call_body_collection=JSON_ARRAY,
)

# GraniteEngineToolParser: structural_tag_model None, so a forced tool_choice is vLLM's standard one.
GRANITE = register(Family(name="granite", grammar=GRAMMAR, tool_names=("granite",), supports_required_and_named=True))
