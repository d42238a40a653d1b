"""Parser names -> engine families, and the per-server build of their passes.

Family modules (``parsers/families``) call ``register``; the factory asks
``reasoning_family`` / ``tool_family`` by vLLM's parser name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..request import ParseRequest
from .family import Encode, Family, FirstFeedRule, PromptRule
from .grammar import Grammar, State
from .machine import Machine, build_lexer
from .opening import FirstFeed
from .reasoning import EngineReasoningStage
from .swap import SwapBlankContentStage
from .tools import EngineToolStage

_REASONING: dict[str, Family] = {}
_TOOLS: dict[str, Family] = {}


def register(family: Family) -> Family:
    for name in family.reasoning_names:
        if name in _REASONING:
            raise ValueError(f"reasoning parser {name!r} registered twice")
        _REASONING[name] = family
    for name in family.tool_names:
        if name in _TOOLS:
            raise ValueError(f"tool parser {name!r} registered twice")
        _TOOLS[name] = family
    return family


def reasoning_family(name: str | None) -> Family | None:
    return _REASONING.get(name) if name else None


def tool_family(name: str | None) -> Family | None:
    return _TOOLS.get(name) if name else None


def reasoning_names() -> tuple[str, ...]:
    return tuple(_REASONING)


def tool_names() -> tuple[str, ...]:
    return tuple(_TOOLS)


@dataclass(frozen=True)
class EngineReasoning:
    """A configured reasoning pass: built once per server, stages per choice."""

    family: Family
    machine: Machine
    prompt: PromptRule
    machine_without_thinking: Machine | None = None  # Family.reasoning_without_thinking

    @classmethod
    def build(
        cls, family: Family, vocab: Mapping[str, int], special_tokens: Iterable[str], encode: Encode | None = None,
    ) -> EngineReasoning:
        family = family.resolve(vocab, encode)
        special_tokens = list(special_tokens)
        lexer = build_lexer(family.grammar, special_tokens)
        machine = Machine(family.grammar, lexer, skip_tools=True, skip_reasoning=False)
        off = family.reasoning_without_thinking
        without = None if off is None else Machine(off, build_lexer(off, special_tokens), skip_tools=True,
                                                   skip_reasoning=False)
        return cls(family, machine, family.prompt_rule(vocab), without)

    def stage(
        self, request: ParseRequest, state: dict[str, Any] | None
    ) -> EngineReasoningStage | SwapBlankContentStage:
        swap = self.family.swap_blank_content
        swapping = swap is not None and swap(request.sent_chat_template_kwargs)
        if swapping and not self.family.swap_absent_content_only:
            return SwapBlankContentStage(self._stage(request, (state or {}).get("in")), state)
        # Granite 4.2's swap tests the content before its newline strip, in the stage.
        return self._stage(request, state, force_content=swapping)

    def _stage(
        self, request: ParseRequest, state: dict[str, Any] | None, force_content: bool = False
    ) -> EngineReasoningStage:
        # A resumed stage's cursor holds where it is: thinking decides only its start, raw, and
        # the machine where the family has one without thinking.
        family = self.family
        off = self.machine_without_thinking
        asks = state is None or family.raw_without_thinking or off is not None
        thinking = asks and family.thinking(request.chat_template_kwargs)
        raw = family.raw_without_thinking and not thinking
        initial = State.REASONING if thinking else State.CONTENT
        if self.family.grammar.initial_state is State.MESSAGE_HEADER:
            initial = State.MESSAGE_HEADER  # a turn that starts in a message header (Inkling) starts there
        if state is None and self.prompt.closes_reasoning(request.prompt_token_ids, initial, self.family.grammar):
            initial = State.CONTENT
        machine = off if off is not None and not thinking else self.machine
        first = self.family.first_feed
        return EngineReasoningStage(machine, initial, raw=raw, state=state,
                                    lstrip_newlines=self.family.content_lstrip_newlines, force_content=force_content,
                                    drop_reasoning=machine is not self.machine,
                                    first_feed=_first_feed(first, own=False),
                                    prefix=self.family.reasoning_prefix)


@dataclass(frozen=True)
class EngineTools:
    """A configured tool pass (``skip_reasoning`` without a reasoning parser)
    and the family whose hooks it runs; a second machine for requests with
    thinking off where the family's config differs then
    (``Family.grammar_without_thinking``)."""

    machine: Machine
    family: Family
    machine_without_thinking: Machine | None = None
    own_reasoning: bool = False  # the reasoning pass is this family's (Family.first_feed)

    @classmethod
    def build(
        cls, family: Family, special_tokens: Iterable[str], *, skip_reasoning: bool,
        vocab: Mapping[str, int] | None = None, own_reasoning: bool = False, encode: Encode | None = None,
    ) -> EngineTools:
        family = family.resolve(vocab, encode)
        special_tokens = list(special_tokens)

        def machine(grammar: Grammar) -> Machine:
            return Machine(grammar, build_lexer(grammar, special_tokens), skip_tools=False,
                           skip_reasoning=skip_reasoning)

        off = family.grammar_without_thinking
        return cls(machine(family.grammar), family, None if off is None else machine(off), own_reasoning)

    def stage(
        self, request: ParseRequest, state: dict[str, Any] | None, *, suppress: bool, legacy: bool, whole: bool,
        auto: bool = True,
    ) -> EngineToolStage:
        machine, family = self.machine, self.family
        off = self.machine_without_thinking
        if off is not None and not family.thinking(request.chat_template_kwargs):
            machine = off
        first = family.first_feed
        return EngineToolStage(machine, tools=request.tools, suppress=suppress, legacy=legacy, whole=whole,
                               state=state, args_rewrite=family.args_rewrite, name_rule=family.call_name, auto=auto,
                               first_feed=_first_feed(first, own=self.own_reasoning))


def _first_feed(rule: FirstFeedRule | None, *, own: bool) -> FirstFeed | None:
    """``Family.first_feed`` for one pass (``own``: its input is the family's own reasoning pass's content)."""
    if rule is None:
        return None
    return lambda text, final: rule(text, final, own)
