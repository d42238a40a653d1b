"""DeepSeek V4, V3.2 and V4.1: DSML tool calls (vLLM 0.34 ``parser/deepseek_v4.py``,
``parser/deepseek_v32.py``, ``parser/deepseek_v41.py``).

Names: reasoning and tools ``deepseek_v4``; tools ``deepseek_v32`` (no
reasoning markup, a ``function_calls`` wrapper); reasoning and tools
``deepseek_v41`` (V4 with spaced DSML tags and turn boundaries).  ::

    <think>...</think>                                   (not V3.2)
    <｜DSML｜ calls>                 (V4: <｜DSML｜tool_calls>; V3.2: <｜DSML｜function_calls>)
    <｜DSML｜ invoke name="get_weather">
    <｜DSML｜ parameter name="city" string="true">Paris</｜DSML｜ parameter>
    </｜DSML｜ invoke>
    </｜DSML｜ calls>

Data, but for the argument converter (``_dsml_arg_converter``: parameters by
regex, ``string="true"`` values kept, others read as JSON) and the
``_convert_args`` override both parsers share: with tools, a lone
``arguments``/``input`` parameter that the schema lacks is unwrapped
(``dsml.unwrap_wrapper_args``), the function name looked up by identical raw
arguments (``Family.args_rewrite``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from re import Pattern
from typing import Any

from ..dsml import param_pattern, parse_params, unwrap_wrapper_args
from ..engine.family import Family
from ..engine.grammar import Event, Grammar, State, Transition
from ..engine.registry import register

C, R, P, N, A, B = (State.CONTENT, State.REASONING, State.TOOL_PREAMBLE, State.TOOL_NAME,
                    State.TOOL_ARGS, State.TOOL_BETWEEN)  # fmt: skip
START, END = Event.TOOL_CALL_START, Event.TOOL_CALL_END

# deepseek_v4_config's tool transitions (V3.2 has exactly these).
TOOL_TRANSITIONS: dict[tuple[State, str], Transition] = {
    (C, "TOOL_START"): Transition(P),
    (P, "INVOKE_PREFIX"): Transition(N, (START,)),
    (C, "INVOKE_PREFIX"): Transition(N, (START,)),  # an invoke without the block opener
    (N, "INVOKE_NAME_END"): Transition(A),
    (A, "INVOKE_END"): Transition(B, (END,)),
    (A, "TOOL_END"): Transition(B, (END,)),
    (B, "INVOKE_PREFIX"): Transition(N, (START,)),
    (B, "TOOL_END"): Transition(B),  # a call ends the turn: text after the block is dropped
    (B, "TOOL_START"): Transition(P),
}
REASONING_TRANSITIONS: dict[tuple[State, str], Transition] = {
    (C, "THINK_START"): Transition(R, (Event.REASONING_START,)),
    (C, "THINK_END"): Transition(C),  # a bare </think> is dropped
    (R, "THINK_START"): Transition(R),
    (R, "THINK_END"): Transition(C, (Event.REASONING_END,)),
    (R, "TOOL_START"): Transition(P, (Event.REASONING_END,)),
}
CONTENT_EVENTS = {C: Event.TEXT, R: Event.REASONING, N: Event.TOOL_NAME, A: Event.ARG}


def dsml_arguments(raw_args: str, *, pattern: Pattern[str]) -> str:
    """``_dsml_arg_converter(raw_args, partial=False)``."""
    return json.dumps(parse_params(raw_args, pattern), ensure_ascii=False)


def unwrap(args_json: str, tools: Any, name: str | None) -> str:
    """``DeepSeekV32Parser._convert_args`` / ``DeepSeekV4Parser._convert_args``."""
    return unwrap_wrapper_args(args_json, tools, name) if tools else args_json


def _thinking(kwargs: Mapping[str, Any]) -> bool:
    """``DeepSeekV4Parser.__init__``: does the output start inside reasoning?"""
    thinking = bool(kwargs.get("thinking") or kwargs.get("enable_thinking"))
    if "thinking" not in kwargs and "enable_thinking" not in kwargs:
        thinking = True
    return thinking and kwargs.get("reasoning_effort") != "none"


D, DS = "｜DSML｜", "｜DSML｜ "


def _with_thinking(name: str, d: str, opens: tuple[str, ...], close: str) -> Grammar:
    """V4's config (``deepseek_v4_config``) with a tag prefix `d` and the block's spellings."""
    return Grammar(
        name=name,
        terminals={
            "THINK_START": "<think>", "THINK_END": "</think>", "TOOL_START": opens, "TOOL_END": close,
            "INVOKE_PREFIX": f'<{d}invoke name="', "INVOKE_NAME_END": '">', "INVOKE_END": f"</{d}invoke>",
            "PARAM_START": f"<{d}parameter", "PARAM_CLOSE": f"</{d}parameter>",
        },
        transitions={**REASONING_TRANSITIONS, **TOOL_TRANSITIONS},
        initial_state=R,
        content_events=CONTENT_EVENTS,
        arg_converter=partial(dsml_arguments, pattern=param_pattern(f"<{d}parameter", f"</{d}parameter>")),
        strip_content_whitespace_with_tools=False,
    )


# The opener's spellings vLLM accepts (DSML_TOOL_START_VARIANTS); the closer has one.
V4 = _with_thinking("deepseek_v4", D, (f"<{D}tool_calls>", f"<{D}toolcalls>", f"<{D}tool>"), f"</{D}tool_calls>")

V32 = Grammar(
    name="deepseek_v32",
    terminals={
        "TOOL_START": f"<{D}function_calls>", "TOOL_END": f"</{D}function_calls>",
        "INVOKE_PREFIX": f'<{D}invoke name="', "INVOKE_NAME_END": '">', "INVOKE_END": f"</{D}invoke>",
        "PARAM_START": f"<{D}parameter", "PARAM_CLOSE": f"</{D}parameter>",
    },
    transitions=TOOL_TRANSITIONS,
    initial_state=C,
    content_events={C: Event.TEXT, N: Event.TOOL_NAME, A: Event.ARG},
    arg_converter=partial(dsml_arguments, pattern=param_pattern(f"<{D}parameter", f"</{D}parameter>")),
    strip_content_whitespace_with_tools=False,
)

V41 = _with_thinking("deepseek_v41", DS, (f"<{DS}calls>", f"<{DS}tool_calls>"), f"</{DS}calls>")

DEEPSEEK_V4 = register(
    Family(
        name="deepseek_v4",
        grammar=V4,
        reasoning_names=("deepseek_v4",),
        tool_names=("deepseek_v4",),
        thinking=_thinking,  # DeepSeekV4Parser.__init__: on unless switched off
        token_id_terminals=frozenset({"THINK_START", "THINK_END", "TOOL_START", "TOOL_END"}),
        args_rewrite=unwrap,
    )
)

DEEPSEEK_V32 = register(
    Family(
        name="deepseek_v32",
        grammar=V32,
        tool_names=("deepseek_v32",),
        args_rewrite=unwrap,
    )
)

DEEPSEEK_V41 = register(
    Family(
        name="deepseek_v41",
        grammar=V41,
        reasoning_names=("deepseek_v41",),
        tool_names=("deepseek_v41",),
        thinking=_thinking,  # DeepSeekV4Parser.__init__: on unless switched off
        turn_boundary_tokens=frozenset({"<｜User｜>", "<｜Assistant｜>"}),
        token_id_terminals=frozenset({"THINK_START", "THINK_END", "TOOL_START", "TOOL_END"}),
        args_rewrite=unwrap,
    )
)
