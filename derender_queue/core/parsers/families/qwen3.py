"""Qwen3: ``<think>`` reasoning and XML-like tool calls (vLLM 0.34 ``parser/qwen3.py``).

Names: reasoning ``qwen3``; tools ``qwen3_coder`` and ``qwen3_xml`` (one
engine in vLLM).  ``hermes`` and its alias ``qwen3_json`` (Qwen2.5/QwQ JSON
calls) are the separate Hermes parser.  ::

    <think>...</think>
    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    </function>
    </tool_call>

Data only, except the argument converter: parameter values are found with
vLLM's regex (a value ends at its closing tag or where the next parameter
opens), one wrapping newline is trimmed on each side, and the values stay
strings until the request's tool schema re-types them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..engine.family import Family
from ..engine.grammar import Event, Grammar, State, Transition
from ..engine.registry import register

# vLLM's patterns use the `regex` module, whose \s excludes U+001C..U+001F.
_S = r"[^\S\x1c-\x1f]"
_PARAM_RE = re.compile(
    rf"<{_S}*parameter{_S}*={_S}*([^>]*)>(.*?)(?:<{_S}*/{_S}*parameter{_S}*>|(?=<{_S}*parameter{_S}*=))",
    re.DOTALL,
)


def _trim_wrapping_newlines(value: str) -> str:
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def qwen3_arguments(raw_args: str) -> str:
    """``_qwen3_arg_converter(raw_args, partial=False)``: a repeated key
    keeps its first position and its last value."""
    params = {m.group(1): _trim_wrapping_newlines(m.group(2)) for m in _PARAM_RE.finditer(raw_args)}
    return json.dumps(params, ensure_ascii=False)


def _thinking(kwargs: Mapping[str, Any]) -> bool:
    return bool(kwargs.get("enable_thinking", True))


C, R, P, N, A, B = (State.CONTENT, State.REASONING, State.TOOL_PREAMBLE, State.TOOL_NAME,
                    State.TOOL_ARGS, State.TOOL_BETWEEN)  # fmt: skip
END_R, START, END = Event.REASONING_END, Event.TOOL_CALL_START, Event.TOOL_CALL_END

GRAMMAR = Grammar(
    name="qwen3",
    terminals={
        "THINK_START": "<think>", "THINK_END": "</think>",
        "TOOL_START": "<tool_call>", "TOOL_END": "</tool_call>",
        "FUNC_PREFIX": "<function=", "FUNC_END": "</function>",
        "PARAM_START": "<parameter=", "PARAM_END": "</parameter>",
        "CLOSE_ANGLE": ">",
    },
    transitions={
        (R, "THINK_START"): Transition(R),
        (R, "THINK_END"): Transition(C, (END_R,)),
        (C, "THINK_END"): Transition(C),  # a repeated </think> is dropped
        (R, "TOOL_START"): Transition(P, (END_R, START)),  # a call ends reasoning
        (C, "TOOL_START"): Transition(P, (END_R, START)),
        (C, "FUNC_PREFIX"): Transition(N, (START,)),  # <function= without <tool_call>
        (P, "TOOL_END"): Transition(C, (END,)),
        (P, "FUNC_PREFIX"): Transition(N),
        (N, "CLOSE_ANGLE"): Transition(A),
        (N, "FUNC_END"): Transition(B, (END,)),
        (N, "TOOL_END"): Transition(C, (END,)),
        (N, "TOOL_START"): Transition(P, (END, START)),
        (N, "FUNC_PREFIX"): Transition(N, (END, START)),
        (A, "FUNC_END"): Transition(B, (END,)),
        (A, "FUNC_PREFIX"): Transition(N, (END, START)),
        (A, "PARAM_START"): Transition(A, (Event.ARG,)),  # tags stay in the raw arguments
        (A, "PARAM_END"): Transition(A, (Event.ARG,)),
        (B, "TOOL_END"): Transition(C),
        (B, "TOOL_START"): Transition(P, (START,)),
        (B, "FUNC_PREFIX"): Transition(N, (START,)),
    },
    initial_state=R,
    arg_converter=qwen3_arguments,
    strip_trailing_reasoning_whitespace=False,
)

QWEN3 = register(
    Family(
        name="qwen3",
        grammar=GRAMMAR,
        reasoning_names=("qwen3",),
        tool_names=("qwen3_coder", "qwen3_xml"),
        thinking=_thinking,
        raw_without_thinking=True,  # Qwen3Parser.extract_reasoning: (None, output)
        turn_boundary_tokens=frozenset({"<|im_start|>", "<|im_end|>"}),
        token_id_terminals=frozenset({"THINK_START", "THINK_END", "TOOL_START", "TOOL_END"}),
    )
)
