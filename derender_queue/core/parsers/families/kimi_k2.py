"""Kimi K2: ``<think>`` reasoning and section-framed tool calls (vLLM 0.34
``parser/kimi_k2.py``).

Names: reasoning and tools ``kimi_k2``.  ::

    <think>...</think>
    <|tool_calls_section_begin|>
    <|tool_call_begin|>functions.get_weather:0
    <|tool_call_argument_begin|>{"city": "Tokyo"}<|tool_call_end|>
    <|tool_calls_section_end|>

Data, but for what ``KimiK2Parser`` overrides in code:

* the name: the text before ``<|tool_call_argument_begin|>`` is Kimi's call
  id; the name is its part before the first ``:``, less ``functions.``, if
  it matches ``.+:\\d+``; otherwise vLLM falls back to a ``"name"`` in the
  arguments, or to the raw header when no arguments came (``kimi_name``, the
  family's ``call_name``);
* the arguments: the raw text, stripped (``_extract_args_json``), re-typed by
  the request's schema;
* thinking: on unless ``thinking``/``enable_thinking`` say otherwise; with it
  off the output is content as it is and the config has no ``<think>``
  terminals (``grammar_without_thinking``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..engine.calls import Accept, name_in_args
from ..engine.family import Family
from ..engine.grammar import Event, Grammar, State, Transition
from ..engine.registry import register

# KimiK2Parser's _TOOL_ID_RE (regex module; `.` and `\d` read the same in re).
_TOOL_ID_RE = re.compile(r"(?P<id>.+:\d+)")


def header_name(header: str) -> str:
    """``KimiK2Parser._extract_tool_id_and_name``'s name, or ""."""
    m = _TOOL_ID_RE.match(header.strip())
    if not m:
        return ""
    return m.group("id").strip().split(":")[0].removeprefix("functions.")


def kimi_name(raw_name: str, raw_args: str | None, accept: Accept) -> str:
    """The slot's name when vLLM builds the call: the header's; else, once
    argument text came (``_emit_name_delta`` cleared the name), the first
    ``"name": "..."`` in it (base ``_handle_tool_end``); else the raw header
    (no argument event ever read it)."""
    name = header_name(raw_name)
    if name or raw_args is None:
        return name
    if not raw_args:
        return raw_name
    return name_in_args(raw_args)


def kimi_arguments(raw_args: str) -> str:
    """``KimiK2Parser._extract_args_json``."""
    return raw_args.strip() or "{}"


def _thinking(kwargs: Mapping[str, Any]) -> bool:
    thinking, enable = kwargs.get("thinking"), kwargs.get("enable_thinking")
    return True if thinking is None and enable is None else bool(thinking) or bool(enable)


C, R, P, N, A, B = (State.CONTENT, State.REASONING, State.TOOL_PREAMBLE, State.TOOL_NAME,
                    State.TOOL_ARGS, State.TOOL_BETWEEN)  # fmt: skip
START, END = Event.TOOL_CALL_START, Event.TOOL_CALL_END

REASONING: dict[tuple[State, str], Transition] = {
    (R, "THINK_START"): Transition(R),
    (R, "THINK_END"): Transition(C, (Event.REASONING_END,)),
    (C, "THINK_END"): Transition(C),  # a repeated </think> is dropped
}
TOOLS: dict[tuple[State, str], Transition] = {
    (R, "TOOL_SECTION_START"): Transition(P, (Event.REASONING_END,)),
    (C, "TOOL_SECTION_START"): Transition(P),
    (P, "TOOL_START"): Transition(N, (START,)),
    (N, "ARG_START"): Transition(A),
    (A, "TOOL_END"): Transition(B, (END,)),
    (A, "TOOL_SECTION_END"): Transition(P, (END,)),
    (B, "TOOL_START"): Transition(N, (START,)),
    # The section's end keeps a tool state: text after native calls is dropped.
    (P, "TOOL_SECTION_END"): Transition(P),
    (B, "TOOL_SECTION_END"): Transition(P),
}
TOOL_TERMINALS = {
    "TOOL_SECTION_START": "<|tool_calls_section_begin|>", "TOOL_SECTION_END": "<|tool_calls_section_end|>",
    "TOOL_START": "<|tool_call_begin|>", "TOOL_END": "<|tool_call_end|>", "ARG_START": "<|tool_call_argument_begin|>",
}  # fmt: skip

GRAMMAR = Grammar(
    name="kimi_k2",
    terminals={"THINK_START": "<think>", "THINK_END": "</think>", **TOOL_TERMINALS},
    transitions={**REASONING, **TOOLS},
    initial_state=R,
    arg_converter=kimi_arguments,
    strip_content_whitespace_with_tools=False,
)

KIMI_K2 = register(
    Family(
        name="kimi_k2",
        grammar=GRAMMAR,
        reasoning_names=("kimi_k2",),
        tool_names=("kimi_k2",),
        thinking=_thinking,
        raw_without_thinking=True,  # KimiK2Parser.extract_reasoning: (None, output)
        token_id_terminals=frozenset({"THINK_START", "THINK_END", "TOOL_SECTION_START"}),
        call_name=kimi_name,
        grammar_without_thinking=replace(GRAMMAR, terminals=TOOL_TERMINALS, transitions=TOOLS, initial_state=C),
    )
)
