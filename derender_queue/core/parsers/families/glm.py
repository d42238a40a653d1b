"""GLM-4.5 / 4.6 / 4.7: ``<think>`` reasoning and XML key/value tool calls
(vLLM 0.34 ``parser/glm47_moe.py``; names ``glm45`` and ``glm47``, one engine
for reasoning and tools).  ::

    <think>...</think>
    <tool_call>get_weather
    <arg_key>city</arg_key>
    <arg_value>Paris</arg_value>
    </tool_call>

The name runs from ``<tool_call>`` to the first ``<arg_key>`` (or
``</tool_call>``) and is stripped before it is accepted; tool names are
validated against the request's tools.  Reasoning ends at ``</think>`` or at
a ``<tool_call>``.  Thinking is on unless ``thinking`` or
``enable_thinking`` is given and both are falsy; then the reasoning pass
returns the output as content and the tool pass reads ``<think>`` and
``</think>`` as no terminals (``glm47_moe_config(thinking=False)``).

Data, except the argument converter: vLLM's regex pairs each
``<arg_key>`` with the ``<arg_value>`` after it; keys are stripped, values
kept as they are, as strings until the tool schema re-types them.  Not
modelled: GLM-5.3's always-thinking chat template (vLLM ignores a
thinking-off request when the tokenizer's template matches it; we do not see
the template).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..engine.calls import Accept, name_in_args
from ..engine.family import Family
from ..engine.grammar import Event, Grammar, State, Transition
from ..engine.registry import register

# vLLM's patterns use the `regex` module, whose \s excludes U+001C..U+001F.
_S = r"[^\S\x1c-\x1f]"
_ARG_RE = re.compile(rf"<arg_key>(.*?)</arg_key>{_S}*<arg_value>(.*?)</arg_value>", re.DOTALL)


def glm_arguments(raw_args: str) -> str:
    """``_glm47_arg_converter(raw_args, partial=False)``: a repeated key keeps
    its first position and its last value."""
    params = {m.group(1).strip(): m.group(2) for m in _ARG_RE.finditer(raw_args)}
    return json.dumps(params, ensure_ascii=False)


def glm_name(raw_name: str, raw_args: str | None, accept: Accept) -> str:
    """The slot's name (``Family.call_name``): ``Glm47MoeParser`` strips it in
    ``_emit_name_delta`` and ``_handle_tool_end``.  A blank one is looked up
    in the arguments: stripped as arguments stream, if the request accepts
    it so (only when no name text came), else unstripped at the call's end."""
    name = raw_name.strip()
    if name or raw_args is None:
        return name
    found = name_in_args(raw_args)
    if not raw_name and accept(found.strip()):
        return found.strip()
    return found if accept(found) else ""


def _thinking(kwargs: Mapping[str, Any]) -> bool:
    """``Glm47MoeParser.__init__``'s ``thinking_enabled``."""
    thinking, enable = kwargs.get("thinking"), kwargs.get("enable_thinking")
    return True if thinking is None and enable is None else bool(thinking) or bool(enable)


C, R, N, A = State.CONTENT, State.REASONING, State.TOOL_NAME, State.TOOL_ARGS
START, END, ARG = Event.TOOL_CALL_START, Event.TOOL_CALL_END, Event.ARG

_TOOL_TERMINALS = {
    "TOOL_START": "<tool_call>", "TOOL_END": "</tool_call>",
    "ARG_KEY_START": "<arg_key>", "ARG_KEY_END": "</arg_key>",
    "ARG_VALUE_START": "<arg_value>", "ARG_VALUE_END": "</arg_value>",
}  # fmt: skip
_ARG_TAGS = ("ARG_KEY_START", "ARG_KEY_END", "ARG_VALUE_START", "ARG_VALUE_END")
_TOOL_TRANSITIONS = {
    (R, "THINK_START"): Transition(R),
    (R, "TOOL_START"): Transition(N, (Event.REASONING_END, START)),  # a call ends reasoning
    (C, "TOOL_START"): Transition(N, (START,)),
    (N, "ARG_KEY_START"): Transition(A, (ARG,)),  # tags stay in the raw arguments
    (N, "TOOL_END"): Transition(C, (END,)),
    (A, "TOOL_END"): Transition(C, (END,)),
    **{(A, tag): Transition(A, (ARG,)) for tag in _ARG_TAGS},
}


def _grammar(thinking: bool) -> Grammar:
    reasoning = {
        (C, "THINK_START"): Transition(R, (Event.REASONING_START,)),
        (R, "THINK_END"): Transition(C, (Event.REASONING_END,)),
        (C, "THINK_END"): Transition(C),  # a stray </think> is dropped
    }
    return Grammar(
        name="glm47_moe",
        terminals={**({"THINK_START": "<think>", "THINK_END": "</think>"} if thinking else {}), **_TOOL_TERMINALS},
        transitions={**(reasoning if thinking else {}), **_TOOL_TRANSITIONS},
        initial_state=R if thinking else C,
        arg_converter=glm_arguments,
        validate_tool_names=True,
    )


GLM = register(
    Family(
        name="glm",
        grammar=_grammar(thinking=True),
        reasoning_names=("glm45", "glm47"),
        tool_names=("glm45", "glm47"),
        grammar_without_thinking=_grammar(thinking=False),
        call_name=glm_name,
        thinking=_thinking,
        raw_without_thinking=True,  # Glm47MoeParser.extract_reasoning: (None, output)
        turn_boundary_tokens=frozenset({"<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"}),
        token_id_terminals=frozenset({"THINK_START", "THINK_END", "TOOL_START", "TOOL_END"}),
    )
)
