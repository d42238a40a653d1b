"""A parser family: its grammar plus the few decisions vLLM makes in code.

``Family`` is what a family module declares; ``register`` makes its parser
names known to the factory.  What vLLM's ``ParserEngine`` subclass decides in
Python becomes a field here:

* ``thinking(chat_template_kwargs)``: does the output start inside reasoning
  (``initial_state``; e.g. Qwen3's ``enable_thinking``, default on);
* ``raw_without_thinking``: with thinking off the reasoning pass returns the
  whole output as content, markup and all (``Qwen3Parser.extract_reasoning``);
* ``turn_boundary_tokens`` and ``token_id_terminals``: which prompt tokens
  tell that the prompt already closed reasoning (``set_prompt_token_ids``);
* ``args_rewrite``: a ``_convert_args`` override that post-processes the
  converter's JSON with the request's tools and the call's name (DeepSeek
  V3.2 / V4.1 unwrap ``{"arguments": {...}}``);
* ``call_name``: how the ``_emit_name_delta`` / ``_handle_tool_end``
  overrides read a call's name (``calls.NameRule``; default ParserEngine's
  own, ``calls.vllm_name``; Kimi K2 reads ``functions.NAME:0`` headers, GLM
  strips the name before accepting it);
* ``grammar_without_thinking``: the config vLLM builds with thinking off when
  it differs (Kimi K2's and ``glm47_moe_config(thinking=False)`` have no
  ``<think>`` terminals); the tool pass of such a request runs it;
* ``supports_required_and_named``: vLLM's tool parser flag, true for a
  parser without an xgrammar structural tag: a forced ``tool_choice`` then
  skips the tool pass and reads the content as the forced JSON
  (``parsers/forced.py``);
* ``for_vocab``: the variant a tokenizer gets, where vLLM's parser picks its
  config from the vocabulary in ``__init__`` (Mistral: ``[THINK]``);
* ``for_encoder``: the variant for the tokenizer's encoder, where vLLM's
  parser compares token ids (PLaMo 3's ``_strip_unfinished_marker``);
* ``swap_blank_content(sent chat_template_kwargs)``: vLLM's
  ``_should_force_content`` (on the request's own kwargs); when true, a blank
  content (None or whitespace) and the reasoning change places after the
  reasoning pass (``NemotronV3Parser.extract_reasoning``; ``swap.py``), or,
  with ``swap_absent_content_only``, only a content that never came
  (Granite 4.2's ``extract_reasoning``; ``reasoning.py``);
* ``content_lstrip_newlines``: Granite 4.2's content loses its leading
  newlines (empty then None);
* ``first_feed(input so far, all of it, own)``: a ``_preprocess_feed`` that
  reads a marker before a pass's input, decided from the whole input (the
  non-streaming parse feeds it at once; ``own``: the input is this family's
  own reasoning pass's content); the input is held until it decides
  (``opening.py``; Gemma 4 opens reasoning for an output with a stray
  ``<channel|>`` or a ``thought`` start);
* ``reasoning_prefix``: an ``extract_reasoning`` override that drops this
  prefix from the reasoning, and a reasoning equal to it rstripped (Gemma 4's
  ``thought\n``);
* ``reasoning_without_thinking``: with thinking off, the reasoning pass runs
  this config from ``CONTENT`` and drops its reasoning (MiniCPM-V's
  ``extract_reasoning``: ``ParserEngine.extract_reasoning``'s content, no
  reasoning; its ``<think>`` spans vanish).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..schema import Tools
from .calls import NameRule, vllm_name
from .grammar import TOOL_STATES, Event, Grammar, State

ThinkingRule = Callable[[Mapping[str, Any]], bool]
FirstFeedRule = Callable[[str, bool, bool], str | None]
Encode = Callable[[str], list[int]]  # the tokenizer's encode, no special tokens added
# (converted arguments JSON, the request's tools, vLLM's function name for
# them) -> the arguments JSON.  vLLM's name is that of the first call in the
# turn whose raw arguments equal this one's (``next(s.name for s in
# self._tool_slots if s.args == raw_args)``), which is usually the call itself.
ArgsRewrite = Callable[[str, Tools, str | None], str]


def _always(kwargs: Mapping[str, Any]) -> bool:
    return True


@dataclass(frozen=True)
class Family:
    name: str
    grammar: Grammar
    reasoning_names: tuple[str, ...] = ()
    tool_names: tuple[str, ...] = ()
    thinking: ThinkingRule = _always
    raw_without_thinking: bool = False
    turn_boundary_tokens: frozenset[str] = frozenset()
    # Terminals vLLM also matches as token ids; their ids mark reasoning ends.
    token_id_terminals: frozenset[str] = frozenset()
    args_rewrite: ArgsRewrite | None = None
    call_name: NameRule = vllm_name
    grammar_without_thinking: Grammar | None = None
    supports_required_and_named: bool = False
    for_vocab: Callable[[Mapping[str, int]], Family] | None = None
    # The variant for the tokenizer's encoder (PLaMo 3 compares token ids).
    for_encoder: Callable[[Encode], Family] | None = None
    # Granite 4.2's extract_reasoning after Qwen3's: content.lstrip("\n") or None.
    content_lstrip_newlines: bool = False
    swap_blank_content: ThinkingRule | None = None
    swap_absent_content_only: bool = False
    reasoning_without_thinking: Grammar | None = None
    first_feed: FirstFeedRule | None = None
    reasoning_prefix: str = ""

    def __post_init__(self) -> None:
        check_call_order(self.grammar)
        if self.grammar_without_thinking is not None:
            check_call_order(self.grammar_without_thinking)

    def resolve(self, vocab: Mapping[str, int] | None, encode: Encode | None = None) -> Family:
        """The variant for this vocabulary (itself unless ``for_vocab``) and encoder (``for_encoder``)."""
        family = self.for_vocab(vocab) if self.for_vocab is not None and vocab is not None else self
        return family.for_encoder(encode) if family.for_encoder is not None and encode is not None else family

    def prompt_rule(self, vocab: Mapping[str, int]) -> PromptRule:
        return PromptRule(self, vocab)


class PromptRule:
    """``ParserEngine.set_prompt_token_ids`` / ``is_reasoning_end`` for one
    vocabulary: does the prompt already close reasoning?  Only grammars with
    turn boundary tokens in the vocabulary look at the prompt at all."""

    def __init__(self, family: Family, vocab: Mapping[str, int]) -> None:
        g = family.grammar
        ids = {t: vocab.get(g.spelling(t) or "") for t in family.token_id_terminals}
        self._start = ids.get("THINK_START")
        self._ends = _end_ids(g, ids)
        self._boundaries = frozenset(i for t in family.turn_boundary_tokens if (i := vocab.get(t)) is not None)
        self._watched = self._ends | self._boundaries | ({self._start} if self._start is not None else set())

    def closes_reasoning(self, prompt: Sequence[int] | None, initial: State, grammar: Grammar) -> bool:
        if not prompt or initial is not State.REASONING or not self._boundaries:
            return False
        start = grammar.transitions.get((initial, "THINK_START"))
        start_opens = start is not None and start.next_state is State.REASONING
        for token in reversed(prompt):
            if token not in self._watched:
                continue
            if token in self._ends:
                return True
            if token == self._start and start_opens:
                return False
            break  # a turn boundary, or a start that opens nothing
        return False  # wait_for_reasoning: still reasoning


def _end_ids(grammar: Grammar, ids: Mapping[str, int | None]) -> frozenset[int]:
    ends = grammar.reasoning_end_terminals()
    out: set[int] = set()
    for terminal, next_state in (ends or {}).items():
        token = ids.get(terminal)
        if token is not None:
            out.add(token)
        elif next_state is State.CONTENT:
            return frozenset()
    return frozenset(out)


_OPEN_CALL = frozenset({State.TOOL_PREAMBLE, State.TOOL_NAME, State.TOOL_ARGS})


def _quiet_preamble(grammar: Grammar) -> bool:
    """A preamble that emits nothing and leaves for a name or arguments only
    by starting a call (DSML's ``<｜DSML｜tool_calls>`` block before its first
    ``invoke``): entering it opens no call, so it needs no TOOL_CALL_START."""
    if State.TOOL_PREAMBLE in grammar.content_events:
        return False
    return all(
        Event.TOOL_CALL_START in tr.events
        for (state, _), tr in grammar.transitions.items()
        if state is State.TOOL_PREAMBLE and tr.next_state in (State.TOOL_NAME, State.TOOL_ARGS)
    )


def check_call_order(grammar: Grammar) -> None:
    """Refuse a grammar whose call text could change after we decide it.

    The tool stage sends a call's header when its name is complete and its
    arguments when its slot ends, so a call's name must end when the machine
    leaves ``TOOL_NAME`` and nothing may reach a slot after its
    ``TOOL_CALL_END``: entering a call state from outside one, or going back
    from arguments to a name, must start a new call.  A quiet preamble
    (``_quiet_preamble``) is no call state.
    """
    open_call = _OPEN_CALL - {State.TOOL_PREAMBLE} if _quiet_preamble(grammar) else _OPEN_CALL
    back = (State.TOOL_NAME,) if _quiet_preamble(grammar) else (State.TOOL_NAME, State.TOOL_PREAMBLE)
    for (state, terminal), tr in grammar.transitions.items():
        events = list(tr.events)
        starts = Event.TOOL_CALL_START in events
        ends_last = Event.TOOL_CALL_END in events and (
            not starts or events.index(Event.TOOL_CALL_END) > events.index(Event.TOOL_CALL_START)
        )
        enters = tr.next_state in open_call and state not in open_call
        if enters and tr.next_state is State.TOOL_ARGS and grammar.tool_call_body_collection:
            enters = False  # a collection body starts its own calls (collection.py)
        back_to_name = state is State.TOOL_ARGS and tr.next_state in back
        reopens = enters or back_to_name or (ends_last and tr.next_state in open_call)
        if reopens and not (starts and not ends_last) and not grammar.calls_reopen:
            raise ValueError(f"{grammar.name}: transition {state.value} --{terminal}--> {tr.next_state.value} "
                             "reopens a call without TOOL_CALL_START")
        call_text = Event.TOOL_NAME in events or Event.ARG in events
        if call_text and state not in TOOL_STATES and tr.next_state not in TOOL_STATES:
            raise ValueError(f"{grammar.name}: {terminal} emits call text outside a call")
