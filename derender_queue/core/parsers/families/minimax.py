"""MiniMax M2: reasoning closed by ``</think>`` (the template opens it) and
``<invoke>`` tool calls (vLLM 0.34 ``parser/minimax_m2.py``; reasoning and
tool name ``minimax_m2``).  ::

    plan</think>
    <minimax:tool_call><invoke name="get_weather">
    <parameter name="city">Seattle</parameter>
    </invoke></minimax:tool_call>

The ``<minimax:tool_call>`` block is a quiet preamble (it opens no call);
each ``<invoke>`` is a call, its name quoted with ``"`` or ``'`` or bare.
Tool names are validated against the request's tools.  Reasoning always
starts open and ends at ``</think>`` or at the tool block; the prompt is not
consulted (the config has no turn boundary tokens).

Data, except the argument converter: vLLM's regex reads each ``<parameter
name=...>`` (quoted or bare name) up to its closing tag or the next
parameter; values are kept verbatim, strings until the tool schema re-types
them.  ``minimax_m2_append_think`` is a separate, non-engine reasoning parser
(``parsers/append_think.py``).
"""

from __future__ import annotations

import json
import re

from ..engine.family import Family
from ..engine.grammar import Event, Grammar, State, Transition
from ..engine.registry import register

# vLLM's patterns use the `regex` module, whose \s excludes U+001C..U+001F.
_S = r"[^\S\x1c-\x1f]"
_NOT_GT_OR_S = r"(?:[^>\s]|[\x1c-\x1f])"
_OPEN = rf"<{_S}*parameter{_S}+name{_S}*="
_PARAM_RE = re.compile(
    rf"{_OPEN}{_S}*(?:\"(?P<dq>[^\"]*)\"|'(?P<sq>[^']*)'|(?P<bare>{_NOT_GT_OR_S}+)){_S}*>"
    rf"(?P<value>.*?)(?:<{_S}*/{_S}*parameter{_S}*>|(?={_OPEN}))",
    re.DOTALL,
)


def minimax_m2_arguments(raw_args: str) -> str:
    """``_minimax_m2_arg_converter(raw_args, partial=False)``: nameless
    parameters are skipped; a repeated name keeps its first position and its
    last value."""
    params: dict[str, str] = {}
    for m in _PARAM_RE.finditer(raw_args):
        name = (m.group("dq") or m.group("sq") or m.group("bare") or "").strip()
        if name:
            params[name] = m.group("value")
    return json.dumps(params, ensure_ascii=False)


C, R, P, N, A, B = (State.CONTENT, State.REASONING, State.TOOL_PREAMBLE, State.TOOL_NAME,
                    State.TOOL_ARGS, State.TOOL_BETWEEN)  # fmt: skip
_INVOKES = ("INVOKE_PREFIX_DQ", "INVOKE_PREFIX_SQ", "INVOKE_PREFIX_UNQUOTED")
_NAME_ENDS = ("NAME_END_DQ", "NAME_END_SQ", "NAME_END_UNQUOTED")

M2_GRAMMAR = Grammar(
    name="minimax_m2",
    terminals={
        "THINK_START": "<think>", "THINK_END": "</think>",
        "TOOL_START": "<minimax:tool_call>", "TOOL_END": "</minimax:tool_call>",
        "PARAM_START": "<parameter name=", "PARAM_END": "</parameter>",
        "INVOKE_PREFIX_DQ": '<invoke name="', "INVOKE_PREFIX_SQ": "<invoke name='",
        "INVOKE_PREFIX_UNQUOTED": "<invoke name=", "INVOKE_END": "</invoke>",
        "NAME_END_DQ": '">', "NAME_END_SQ": "'>", "NAME_END_UNQUOTED": ">",
    },
    transitions={
        (R, "THINK_START"): Transition(R),
        (R, "THINK_END"): Transition(C, (Event.REASONING_END,)),
        (C, "THINK_END"): Transition(C),
        (R, "TOOL_START"): Transition(P, (Event.REASONING_END,)),  # the tool block ends reasoning
        (C, "TOOL_START"): Transition(P),
        (A, "PARAM_START"): Transition(A, (Event.ARG,)),  # tags stay in the raw arguments
        (A, "PARAM_END"): Transition(A, (Event.ARG,)),
        (P, "TOOL_END"): Transition(C),
        (B, "TOOL_END"): Transition(C),
        (C, "TOOL_END"): Transition(C),
        (A, "INVOKE_END"): Transition(B, (Event.TOOL_CALL_END,)),
        **{(s, t): Transition(N, (Event.TOOL_CALL_START,)) for s in (C, P, B) for t in _INVOKES},
        **{(N, t): Transition(A) for t in _NAME_ENDS},
    },
    initial_state=R,
    arg_converter=minimax_m2_arguments,
    validate_tool_names=True,
)

MINIMAX_M2 = register(
    Family(
        name="minimax_m2",
        grammar=M2_GRAMMAR,
        reasoning_names=("minimax_m2",),
        tool_names=("minimax_m2",),
        token_id_terminals=frozenset({"THINK_START", "THINK_END", "TOOL_START", "TOOL_END"}),
    )
)
