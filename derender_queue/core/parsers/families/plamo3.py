"""PLaMo 3 (vLLM 0.34 ``parser/plamo3.py``; reasoning and tool name ``plamo3``).  ::

    <|plamo:begin_think:plamo|>...<|plamo:end_think:plamo|>...content...
    <|plamo:begin_tool_requests:plamo|><|plamo:begin_tool_request:plamo|>
    <|plamo:begin_tool_name:plamo|>get_weather<|plamo:end_tool_name:plamo|>
    <|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>{"city": "Paris"}
    <|plamo:end_tool_arguments:plamo|><|plamo:end_tool_request:plamo|><|plamo:end_tool_requests:plamo|>

The markers are several tokens each (``<|plamo:begin_``, ``<|plamo:end_`` and
``:plamo|>`` are special tokens kept as text, ``preserve_tokens``);
``<|plamo:tag|>`` (end of turn) closes whatever is open.  Thinking is on
unless ``enable_thinking`` is false (then no think terminals, in both
passes: ``grammar_without_thinking``, ``reasoning_without_thinking``).
What ``Plamo3Parser`` overrides, as engine flags:

* the arguments are the raw text, stripped, ``{}`` when empty
  (``_extract_args_json``), after cutting a trailing ``<|plamo:`` piece when
  the text before it is JSON (``_handle_arg_chunk``);
* a request's end does not close its call for good: arguments opened again
  before the next name go to the same call (``Grammar.calls_reopen``);
* an unfinished marker (the text from the last ``<|plamo:`` whose token ids
  are a proper prefix of a terminal's) is cut from the reasoning, the tool
  pass's content and a call's name (``_strip_unfinished_marker``): that
  compares token ids, so the family is built per encoder
  (``Family.for_encoder``; ``Grammar.unfinished_marker``, applied to the
  reasoning and content fields by ``engine/unfinished.py``); a name is cut
  whole (``Family.call_name``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ..engine.calls import Accept, vllm_name
from ..engine.family import Encode, Family
from ..engine.grammar import Event, Grammar, State, Transition
from ..engine.registry import register

BEGIN_THINK, END_THINK = "<|plamo:begin_think:plamo|>", "<|plamo:end_think:plamo|>"
EOT = "<|plamo:tag|>"
MARKER = "<|plamo:"
PRESERVE = frozenset({"<|plamo:begin_", "<|plamo:end_", ":plamo|>"})

C, R, P, N, A, B = (State.CONTENT, State.REASONING, State.TOOL_PREAMBLE, State.TOOL_NAME, State.TOOL_ARGS,
                    State.TOOL_BETWEEN)  # fmt: skip

TOOL_TERMINALS = {
    "TOOL_REQUESTS_START": "<|plamo:begin_tool_requests:plamo|>",
    "TOOL_REQUESTS_END": "<|plamo:end_tool_requests:plamo|>",
    "TOOL_REQUEST_START": "<|plamo:begin_tool_request:plamo|>",
    "TOOL_REQUEST_END": "<|plamo:end_tool_request:plamo|>",
    "TOOL_NAME_START": "<|plamo:begin_tool_name:plamo|>",
    "TOOL_NAME_END": "<|plamo:end_tool_name:plamo|>",
    "TOOL_ARGS_START": "<|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>",
    "TOOL_ARGS_END": "<|plamo:end_tool_arguments:plamo|>",
    "EOT": EOT,
}
TOOL_TRANSITIONS = {
    (C, "TOOL_REQUESTS_START"): Transition(P),
    (P, "TOOL_REQUEST_START"): Transition(P),
    (P, "TOOL_NAME_START"): Transition(N, (Event.TOOL_CALL_START,)),
    (N, "TOOL_NAME_END"): Transition(P),
    (P, "TOOL_ARGS_START"): Transition(A),
    (A, "TOOL_ARGS_END"): Transition(B),
    (B, "TOOL_REQUEST_END"): Transition(P, (Event.TOOL_CALL_END,)),
    (P, "TOOL_REQUESTS_END"): Transition(C),
    (R, "EOT"): Transition(C, (Event.REASONING_END,)),
    **{(s, "EOT"): Transition(C) for s in (C, P, N, A, B)},
}
THINK_TRANSITIONS = {
    (R, "THINK_START"): Transition(R),
    (C, "THINK_START"): Transition(R, (Event.REASONING_START,)),
    (R, "THINK_END"): Transition(C, (Event.REASONING_END,)),
    (C, "THINK_END"): Transition(C),
    (R, "TOOL_REQUESTS_START"): Transition(P, (Event.REASONING_END,)),
}


def plamo3_arguments(raw_args: str) -> str:
    """``_handle_arg_chunk``'s cut of a trailing ``<|plamo:`` piece, then ``_extract_args_json``."""
    cut = raw_args.rfind(MARKER)
    if cut >= 0:
        try:
            json.loads(raw_args[:cut])
        except ValueError:
            pass
        else:
            raw_args = raw_args[:cut]
    return raw_args.strip() or "{}"


def _grammar(thinking: bool) -> Grammar:
    return Grammar(
        name="plamo3",
        terminals={**({"THINK_START": BEGIN_THINK, "THINK_END": END_THINK} if thinking else {}), **TOOL_TERMINALS},
        transitions={**(THINK_TRANSITIONS if thinking else {}), **TOOL_TRANSITIONS},
        initial_state=R if thinking else C,
        preserve_tokens=PRESERVE,
        strip_trailing_reasoning_whitespace=False,
        strip_content_whitespace_with_tools=False,
        args_json=plamo3_arguments,
        calls_reopen=True,
    )


def _thinking(kwargs: Mapping[str, Any]) -> bool:
    return bool(kwargs.get("enable_thinking", True))  # Plamo3Parser.__init__


def _unfinished(grammar: Grammar, encode: Encode) -> Callable[[str], int | None]:
    """``_strip_unfinished_marker``: where the unfinished marker of ``text`` starts, or None."""
    sequences = [tuple(encode(literal)) for literal in grammar.literals()]

    def cut(text: str) -> int | None:
        start = text.rfind(MARKER)
        if start < 0:
            return None
        ids = tuple(encode(text[start:]))
        return start if any(len(seq) > len(ids) and seq[: len(ids)] == ids for seq in sequences) else None

    return cut


def _for_encoder(encode: Encode) -> Family:
    on, off = _grammar(True), _grammar(False)
    cut_on, cut_off = _unfinished(on, encode), _unfinished(off, encode)

    def name(raw_name: str, raw_args: str | None, accept: Accept) -> str:
        # The thinking grammar's literals: a name's think-marker prefix is cut either way.
        start = cut_on(raw_name)
        return vllm_name(raw_name if start is None else raw_name[:start], raw_args, accept)

    return replace(
        PLAMO3, grammar=replace(on, unfinished_marker=cut_on),
        grammar_without_thinking=replace(off, unfinished_marker=cut_off),
        reasoning_without_thinking=replace(off, unfinished_marker=cut_off), call_name=name, for_encoder=None,
    )


PLAMO3 = register(
    Family(
        name="plamo3",
        grammar=_grammar(True),
        reasoning_names=("plamo3",),
        tool_names=("plamo3",),
        thinking=_thinking,
        grammar_without_thinking=_grammar(False),
        reasoning_without_thinking=_grammar(False),  # both passes run the config without thinking
        token_id_terminals=frozenset({"EOT", "THINK_START", "THINK_END"}),
        for_encoder=_for_encoder,
    )
)
