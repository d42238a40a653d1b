"""Inkling: typed content blocks, every marker a special token (vLLM 0.34
``parser/inkling.py``; reasoning and tool name ``inkling``).  ::

    <|message_model|><|content_thinking|>...reasoning...<|end_message|>
    <|message_model|><|content_text|>...visible text...<|end_message|>
    <|message_model|><|content_invoke_tool_json|>{"name": "get_weather", "args": {"city": "SF"}}<|end_message|>

Blocks repeat in any order; ``<|content_model_end_sampling|>`` may end one.
The turn starts in the message header (the prompt prefilled
``<|message_model|>``), whose text (an optional function name) is dropped
unless the block ends there.  Data, plus three small engine flags for what
``InklingParser`` overrides: it starts in ``MESSAGE_HEADER`` whatever the
chat template kwargs say (``registry.py``), a nameless call's JSON keeps its
arguments under ``args`` first (``_extract_args_value``;
``Grammar.envelope_arg_keys``), and text blocks after a call are content
(its ``_single_pass_parse`` flushes the deferred text;
``Grammar.content_after_calls``).  The argument converter is vLLM's
``extract_json_member_object`` for ``args`` (the verbatim object text, ``{}``
without one), used once the call's ``"name"`` is read from its JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..engine.family import Family
from ..engine.grammar import Event, Grammar, State, Transition
from ..engine.registry import register
from .llama import member_object  # vLLM's extract_json_member_object

MESSAGE_MODEL = "<|message_model|>"
CONTENT_TEXT = "<|content_text|>"
CONTENT_THINKING = "<|content_thinking|>"
CONTENT_INVOKE_TOOL_JSON = "<|content_invoke_tool_json|>"
CONTENT_INVOKE_TOOL_TEXT = "<|content_invoke_tool_text|>"
CONTENT_TOOL_ERROR = "<|content_tool_error|>"
CONTENT_MODEL_END_SAMPLING = "<|content_model_end_sampling|>"
END_MESSAGE = "<|end_message|>"


def inkling_arguments(raw_args: str) -> str:
    """``_inkling_arg_converter(raw_args, partial=False)``."""
    args = member_object(raw_args, "args")
    return "{}" if args is None else args


def _any(kwargs: Mapping[str, Any]) -> bool:
    return True  # InklingParser reads no thinking switch; the grammar starts in the header


C, R, H, A = State.CONTENT, State.REASONING, State.MESSAGE_HEADER, State.TOOL_ARGS
RE, RS, CS, CE = Event.REASONING_END, Event.REASONING_START, Event.TOOL_CALL_START, Event.TOOL_CALL_END

_TRANSITIONS: dict[tuple[State, str], Transition] = {
    (R, "THINK_START"): Transition(R),
    (R, "TOOL_START"): Transition(A, (RE, CS)),
}
for _at in (C, H):  # between blocks (or in a text block) and in a message header alike
    _TRANSITIONS |= {
        (_at, "MSG_MODEL"): Transition(H),
        (_at, "TEXT_START"): Transition(C, (RE,)),
        (_at, "THINK_START"): Transition(R, (RS,)),
        (_at, "TOOL_START"): Transition(A, (RE, CS)),
        (_at, "TOOL_TEXT"): Transition(C, (RE,)),
        (_at, "TOOL_ERROR"): Transition(C, (RE,)),
    }
for _end in ("THINK_END", "END_SAMPLING"):
    _TRANSITIONS[(C, _end)] = Transition(C)
    _TRANSITIONS[(R, _end)] = Transition(C, () if _end == "THINK_END" else (RE,))
    _TRANSITIONS[(A, _end)] = Transition(C, (CE,))
    _TRANSITIONS[(H, _end)] = Transition(C, (Event.TEXT,))

GRAMMAR = Grammar(
    name="inkling",
    terminals={
        "MSG_MODEL": MESSAGE_MODEL,
        "TEXT_START": CONTENT_TEXT,
        "THINK_START": CONTENT_THINKING,
        "THINK_END": END_MESSAGE,
        "END_SAMPLING": CONTENT_MODEL_END_SAMPLING,
        "TOOL_START": CONTENT_INVOKE_TOOL_JSON,
        "TOOL_TEXT": CONTENT_INVOKE_TOOL_TEXT,
        "TOOL_ERROR": CONTENT_TOOL_ERROR,
    },
    transitions=_TRANSITIONS,
    initial_state=H,
    arg_converter=inkling_arguments,
    strip_trailing_reasoning_whitespace=True,
    strip_content_whitespace_with_tools=False,
    envelope_arg_keys=("args", "arguments", "parameters"),
    content_after_calls=True,
)

INKLING = register(Family(name="inkling", grammar=GRAMMAR, reasoning_names=("inkling",), tool_names=("inkling",),
                          thinking=_any))
