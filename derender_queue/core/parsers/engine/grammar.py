"""A family's output format as data: terminals, states, transitions, events.

The vocabulary is vLLM 0.34's ``ParserEngineConfig`` (``vllm/parser/engine``)
so a family's config reads like vLLM's: terminals are literal strings, a
transition maps (state, terminal) to the next state and the events it emits,
and text between terminals becomes the event ``content_events`` names for the
current state (no entry: the text is dropped).  Only what the non-streaming
answer depends on is modelled: vLLM's token-id terminals, argument-delta
streaming hooks and structured-output hints change how vLLM streams, not what
it answers, and our streams follow its non-streaming answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

# One tool call's raw argument text -> its arguments JSON (vLLM's
# ``arg_converter(raw, partial=False)``).  May raise ValueError/TypeError,
# then the engine falls back to reading the text as JSON, as vLLM does.
ArgConverter = Callable[[str], str]


class State(StrEnum):
    CONTENT = "content"
    REASONING = "reasoning"
    MESSAGE_HEADER = "header"
    TOOL_PREAMBLE = "preamble"
    TOOL_NAME = "name"
    TOOL_ARGS = "args"
    TOOL_BETWEEN = "between"


class Event(StrEnum):
    TEXT = "text"
    REASONING_START = "reasoning_start"
    REASONING = "reasoning"
    REASONING_END = "reasoning_end"
    TOOL_CALL_START = "call_start"
    TOOL_NAME = "call_name"
    ARG = "arg"
    TOOL_CALL_END = "call_end"


TOOL_STATES = frozenset({State.TOOL_PREAMBLE, State.TOOL_NAME, State.TOOL_ARGS, State.TOOL_BETWEEN})
PLAIN_STATES = frozenset({State.CONTENT, State.REASONING})
TOOL_EVENTS = frozenset({Event.TOOL_CALL_START, Event.TOOL_NAME, Event.ARG, Event.TOOL_CALL_END})

DEFAULT_CONTENT_EVENTS: Mapping[State, Event] = {
    State.CONTENT: Event.TEXT,
    State.REASONING: Event.REASONING,
    State.TOOL_NAME: Event.TOOL_NAME,
    State.TOOL_ARGS: Event.ARG,
}


@dataclass(frozen=True, slots=True)
class Transition:
    next_state: State
    events: tuple[Event, ...] = ()


@dataclass(frozen=True)
class Grammar:
    """One family's format (vLLM's ``ParserEngineConfig``, answer-relevant part).

    ``terminals`` maps a terminal name to its spelling or spellings.
    ``strip_trailing_reasoning_whitespace``, ``drop_whitespace_only_content_before_tools``
    and ``strip_content_whitespace_with_tools`` are vLLM's flags of the same names.
    """

    name: str
    terminals: Mapping[str, str | tuple[str, ...]]
    transitions: Mapping[tuple[State, str], Transition]
    initial_state: State = State.CONTENT
    content_events: Mapping[State, Event] = field(default_factory=lambda: dict(DEFAULT_CONTENT_EVENTS))
    arg_converter: ArgConverter | None = None
    # Special tokens that are not terminals but must not be dropped.
    preserve_tokens: frozenset[str] = frozenset()
    strip_trailing_reasoning_whitespace: bool = True
    drop_whitespace_only_content_before_tools: bool = True
    strip_content_whitespace_with_tools: bool = True
    validate_tool_names: bool = False
    # What a vLLM ``ParserEngine`` subclass overrides when it builds a call
    # (Mistral): ``_accept_tool_name`` taking "" too; ``_extract_name_and_args``
    # reading no ``{"name", "arguments"}`` envelope from a nameless body (its
    # ``_try_extract_name`` is ``Family.call_name``); ``_extract_args_json``,
    # the raw arguments -> JSON when no converter applies.
    accept_empty_tool_names: bool = False
    json_envelope: bool = True
    # ``_extract_args_value``'s keys: where a nameless JSON body keeps its
    # arguments (Inkling reads ``args`` first).
    envelope_arg_keys: tuple[str, ...] = ("arguments", "parameters")
    # Text after a call's events is content too (Inkling's ``_single_pass_parse``
    # flushes the engine's deferred content), not dropped once a call is sent.
    content_after_calls: bool = False
    # A TOOL_CALL_END that does not close its slot (PLaMo 3: arguments opened
    # again after a request's end go to the last call, vLLM's tool index being
    # unchanged); the slot closes when the next call starts or the pass ends,
    # and produces vLLM's delta (which drops the text after calls) only on its
    # arguments or a TOOL_CALL_END.
    calls_reopen: bool = False
    # The start of an unfinished marker at the end of a field, or None (PLaMo
    # 3's ``_strip_unfinished_marker``): cut from the reasoning pass's
    # reasoning and the tool pass's content, each a whole field (unfinished.py).
    unfinished_marker: Callable[[str], int | None] | None = None
    args_json: Callable[[str], str] | None = None
    # ``tool_call_body_collection`` (collection.py): "semicolon_sequence" or "json_array".
    tool_call_body_collection: str | None = None
    # ``complete_tool_call_validator``: given the tool pass's whole input,
    # False makes it the content, no calls (tools.py holds such input).
    complete_tool_call_validator: Callable[[str], bool | None] | None = None
    validated_prefixes: tuple[str, ...] = ()  # the input the validator can refuse starts so
    # A tool pass whose input starts with "{" reads as if this terminal
    # spelling came first (Llama's ``_preprocess_feed``), unless calls are suppressed.
    bare_json_tool_start: str | None = None

    def literals(self) -> dict[str, str]:
        """Every spelling -> its terminal name."""
        out: dict[str, str] = {}
        for name, spelling in self.terminals.items():
            for text in (spelling,) if isinstance(spelling, str) else spelling:
                out[text] = name
        return out

    def spelling(self, terminal: str) -> str | None:
        """The canonical (first) spelling of a terminal."""
        value = self.terminals.get(terminal)
        if isinstance(value, tuple):
            return value[0] if value else None
        return value

    def tool_terminals(self) -> frozenset[str]:
        """Terminals of transitions into or out of tool states."""
        return frozenset(
            t for (s, t), tr in self.transitions.items() if tr.next_state in TOOL_STATES or s in TOOL_STATES
        )

    def tool_exit_terminals(self) -> frozenset[str]:
        return frozenset(
            t for (s, t), tr in self.transitions.items() if s in TOOL_STATES and tr.next_state not in TOOL_STATES
        )

    def reasoning_markup_terminals(self) -> frozenset[str]:
        """vLLM's ``_compute_reasoning_markup_terminals``: reasoning-only markers
        that a tool pass without a reasoning parser reads as plain text; one
        marker shared with other structure disables that for the grammar."""
        markers = frozenset(
            t
            for (s, t), tr in self.transitions.items()
            if State.REASONING in (s, tr.next_state) and tr.next_state not in TOOL_STATES
        )
        reasoning_events = {Event.REASONING_START, Event.REASONING_END}
        for (s, t), tr in self.transitions.items():
            if t in markers and (
                s not in PLAIN_STATES or tr.next_state not in PLAIN_STATES or not reasoning_events.issuperset(tr.events)
            ):
                return frozenset()
        return markers

    def reasoning_end_terminals(self) -> dict[str, State] | None:
        """vLLM's ``_derive_reasoning_end_token_ids`` before the vocabulary
        lookup: terminals ending reasoning, or None when a transition leaves
        reasoning without saying so (then no token marks the end)."""
        ends: dict[str, State] = {}
        for (s, t), tr in self.transitions.items():
            if s is not State.REASONING:
                continue
            if Event.REASONING_END in tr.events:
                ends.setdefault(t, tr.next_state)
            elif tr.next_state is not State.REASONING:
                return None
        return ends
