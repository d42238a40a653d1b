"""Mistral: ``[THINK]`` reasoning and ``[TOOL_CALLS]name[ARGS]{...}`` calls
(vLLM 0.34 ``parser/mistral.py``, one engine for both names ``mistral``).  ::

    [THINK]plan[/THINK]Sure.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]search{"q": 1}

vLLM's ``MistralParser.__init__`` picks its config from the tokenizer, and so
does ``for_vocab`` here (Hugging Face tokenizers; Mistral's own tokenizer
mode is not served, docs/compatibility.md):

* ``[THINK]`` in the vocabulary (v13+): the ``special_token`` config, output
  starting in content, ``[THINK]...[/THINK]`` opening and closing reasoning
  anywhere;
* no ``[THINK]``: the ``none`` config, and the reasoning parser returns the
  whole output as content (``extract_reasoning``: ``(None, output)``);
* no ``[ARGS]`` (pre-v11, e.g. Mistral 7B v0.3): vLLM parses calls as a JSON
  array in its legacy code, which is not modelled yet: the tool parser
  refuses such a tokenizer (docs/parsers.md).

The call overrides, data on the grammar: a name is final once ``[ARGS]`` or
``{`` ends it, empty included (``_accept_tool_name``); no name is read from
the arguments (``_try_extract_name``, ``_extract_name_and_args``); and the
arguments are the first JSON value of the text, whatever follows it dropped,
or the stripped text when it is not JSON (``_extract_args_json``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..engine.calls import Accept
from ..engine.family import Family
from ..engine.grammar import Event, Grammar, State, Transition
from ..engine.registry import register

TOOL_CALLS, ARGS, THINK, END_THINK = "[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]"


def mistral_args(raw_args: str) -> str:
    """``MistralParser._extract_args_json``: the first complete JSON value."""
    stripped = raw_args.strip()
    if not stripped:
        return "{}"
    try:
        _, end = json.JSONDecoder().raw_decode(stripped)
    except json.JSONDecodeError:
        return stripped
    return stripped[:end]


def _never(kwargs: Mapping[str, Any]) -> bool:
    return False  # initial_state=CONTENT: reasoning only inside [THINK]...[/THINK]


C, R, N, A = State.CONTENT, State.REASONING, State.TOOL_NAME, State.TOOL_ARGS
END_R, START, END = Event.REASONING_END, Event.TOOL_CALL_START, Event.TOOL_CALL_END


def _grammar(think: bool) -> Grammar:
    """``mistral_config(reasoning_encoding="special_token" | "none")``."""
    reasoning = {
        (C, "THINK_START"): Transition(R),
        (R, "THINK_START"): Transition(R),  # a repeated [THINK] is absorbed
        (R, "THINK_END"): Transition(C, (END_R,)),
        (C, "THINK_END"): Transition(C),  # a stray [/THINK] is dropped
        (R, "TOOL_CALLS"): Transition(N, (END_R, START)),  # a call ends reasoning
    } if think else {}  # fmt: skip
    return Grammar(
        name="mistral" if think else "mistral_no_think",
        terminals={
            **({"THINK_START": THINK, "THINK_END": END_THINK} if think else {}),
            "TOOL_CALLS": TOOL_CALLS, "ARGS": ARGS, "OPEN_BRACE": "{",
        },
        transitions={
            **reasoning,
            (C, "TOOL_CALLS"): Transition(N, (END_R, START) if think else (START,)),
            (N, "ARGS"): Transition(A),
            (N, "OPEN_BRACE"): Transition(A, (Event.ARG,)),  # the brace opens the arguments' JSON
            (A, "TOOL_CALLS"): Transition(N, (END, START)),  # the next call
        },
        initial_state=C,
        strip_trailing_reasoning_whitespace=True,
        accept_empty_tool_names=True,
        json_envelope=False,
        args_json=mistral_args,
    )  # fmt: skip


def mistral_name(raw_name: str, raw_args: str | None, accept: Accept) -> str:
    """``Family.call_name``: ``MistralParser._try_extract_name`` is the slot's
    own name, "" included; no ``"name"`` is read from the arguments."""
    return raw_name


def _for_vocab(vocab: Mapping[str, int]) -> Family:
    if TOOL_CALLS not in vocab:  # vLLM refuses to start (RuntimeError in __init__)
        raise ValueError("Mistral parser could not locate the tool call token in the tokenizer!")
    if ARGS not in vocab:
        raise ValueError("mistral parser: a pre-v11 tokenizer (no [ARGS] token) is not supported yet")
    return MISTRAL if THINK in vocab else MISTRAL_NO_THINK


MISTRAL_NO_THINK = Family(
    name="mistral",
    grammar=_grammar(think=False),
    thinking=_never,
    raw_without_thinking=True,  # MistralParser.extract_reasoning: (None, output)
    token_id_terminals=frozenset({"TOOL_CALLS", "ARGS"}),
    call_name=mistral_name,
)

MISTRAL = register(
    Family(
        name="mistral",
        grammar=_grammar(think=True),
        reasoning_names=("mistral",),
        tool_names=("mistral",),
        thinking=_never,
        token_id_terminals=frozenset({"THINK_START", "THINK_END", "TOOL_CALLS", "ARGS"}),
        call_name=mistral_name,
        for_vocab=_for_vocab,
    )
)
