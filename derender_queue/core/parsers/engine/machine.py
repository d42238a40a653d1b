"""The state machine that turns lexer tokens into events, for one pass.

A port of the answer-relevant part of vLLM 0.34's ``StreamingParserEngine``
(``_on_terminal``, ``_apply_transition``, ``_emit_for_state``, ``finish``) in
its text-only mode, which is how vLLM's non-streaming ``parse`` runs it (the
serving layer passes no token ids there).  The two pass flags are vLLM's:
``skip_tools`` for the reasoning pass (tool markup is text of the current
state; an implicit reasoning end still ends reasoning) and
``skip_reasoning`` for a tool pass without a reasoning parser (reasoning-only
markers are text).

``Machine`` holds the immutable tables; ``Cursor`` is the small mutable
position (state, call index, flags, a header buffer) a stage serializes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..lexer import LiteralLexer, Token
from .collection import Collection
from .grammar import TOOL_STATES, Event, Grammar, State, Transition

DROP = "__DROP__"

# A state's value -> the state: an Enum call or ``.value`` costs a chunk more
# than the rest of restoring a cursor (bench/stream.py's parsed rows).
_STATES = {state.value: state for state in State}

# (event, text, call index)
Emitted = tuple[Event, str, int]


@dataclass(slots=True)
class Cursor:
    state: State
    index: int = -1  # the current tool call (vLLM's tool_index)
    in_skipped_span: bool = False
    header: str = ""  # MESSAGE_HEADER text so far
    held: str = ""  # the lexer's undecided suffix
    coll: list[Any] | None = None  # a JSON-collection body's position (collection.py)

    def to_state(self) -> list[Any]:
        out = [self.state._value_, self.index, self.in_skipped_span, self.header, self.held]
        return out if self.coll is None else [*out, self.coll]

    @classmethod
    def from_state(cls, state: list[Any]) -> Cursor:
        return cls(_STATES[state[0]], state[1], state[2], state[3], state[4], state[5] if len(state) > 5 else None)


def build_lexer(grammar: Grammar, special_tokens: Iterable[str]) -> LiteralLexer:
    """Grammar literals plus the tokenizer's other special tokens, whose text
    vLLM's engine drops in every state (``_build_drop_info``)."""
    literals = grammar.literals()
    for token in special_tokens:
        if token and token not in literals and token not in grammar.preserve_tokens:
            literals[token] = DROP
    return LiteralLexer(literals)


class Machine:
    def __init__(self, grammar: Grammar, lexer: LiteralLexer, *, skip_tools: bool, skip_reasoning: bool) -> None:
        self.grammar = grammar
        self.lexer = lexer
        self.markers = grammar.literals()  # spelling -> terminal, once per model (not per chunk)
        self._skip_tools = skip_tools
        self._skip_reasoning = skip_reasoning
        self._transitions = grammar.transitions
        self._content_events = grammar.content_events
        self._tool_terminals = grammar.tool_terminals()
        self._tool_exits = grammar.tool_exit_terminals()
        self._markup = grammar.reasoning_markup_terminals() if skip_reasoning else frozenset()
        self._collection = grammar.tool_call_body_collection
        self._inert: dict[State, frozenset[str]] = {}

    def feed(self, cur: Cursor, text: str, *, final: bool = False) -> list[Emitted]:
        tokens, cur.held = self.lexer.scan(cur.held, text, final=final)
        return self.run(cur, tokens)

    def inert(self, state: State) -> frozenset[str]:
        """Terminals that ``_on_terminal`` reads in ``state`` as that state's
        text and nothing else: no transition, not dropped, not a skipped
        span's exit (whose flag they would clear); reasoning markup too."""
        names = self._inert.get(state)
        if names is None:
            names = self._inert[state] = frozenset(
                t for t in self.lexer.names()
                if t != DROP and (
                    t in self._markup if (state, t) in self._transitions
                    else not (self._skip_tools and t in self._tool_exits)
                )
            )
        return names

    def run(self, cur: Cursor, tokens: list[Token]) -> list[Emitted]:
        out: list[Emitted] = []
        for name, text in tokens:
            if name is None:
                if text:
                    self._emit_for_state(cur, text, out)
            else:
                self._on_terminal(cur, name, text, out)
        return out

    def finish(self, cur: Cursor) -> list[Emitted]:
        """End of the pass: flush the lexer and close what is open."""
        out = self.feed(cur, "", final=True)
        if cur.state in TOOL_STATES:
            # A collection body ends its calls itself; only an open object needs an end.
            open_call = Collection(cur.coll).in_element if self._collection else True
            if open_call and cur.index >= 0:
                out.append((Event.TOOL_CALL_END, "", cur.index))
            cur.coll = None
        elif cur.state is State.REASONING:
            out.append((Event.REASONING_END, "", cur.index))
        elif cur.state is State.MESSAGE_HEADER and cur.header:
            out.append((Event.TEXT, cur.header, cur.index))
            cur.header = ""
        cur.state = State.CONTENT
        return out

    def _on_terminal(self, cur: Cursor, terminal: str, value: str, out: list[Emitted]) -> None:
        tr = self._transitions.get((cur.state, terminal))
        if tr is None:
            if terminal == DROP:
                return
            if self._skip_tools and terminal in self._tool_exits:
                cur.in_skipped_span = False
            self._emit_for_state(cur, value, out)
            return
        if terminal in self._markup:
            self._emit_for_state(cur, value, out)
            return
        skipped = self._skip_tools and terminal in self._tool_terminals
        if skipped and self._skip_tool_terminal(cur, terminal, tr, value, out):
            return
        self._apply(cur, tr, value, out)

    def _skip_tool_terminal(self, cur: Cursor, terminal: str, tr: Transition, value: str, out: list[Emitted]) -> bool:
        """The reasoning pass's reading of tool markup; False when the
        terminal closes a plain block and takes its normal transition."""
        is_opener = tr.next_state in TOOL_STATES
        is_exit = terminal in self._tool_exits
        if is_exit and not is_opener and not cur.in_skipped_span:
            return False
        if is_opener:
            cur.in_skipped_span = True
        elif is_exit:
            cur.in_skipped_span = False
        leaving_header = cur.state is State.MESSAGE_HEADER
        if leaving_header:
            cur.header = ""
        if Event.REASONING_END in tr.events:
            cur.state = State.CONTENT
            out.append((Event.REASONING_END, value, cur.index))
            out.append((Event.TEXT, value, cur.index))
        elif leaving_header:
            cur.state = State.CONTENT
            out.append((Event.TEXT, value, cur.index))
        else:
            event = self._content_events.get(cur.state)
            if event is not None:
                out.append((event, value, cur.index))
        return True

    def _emit_for_state(self, cur: Cursor, text: str, out: list[Emitted]) -> None:
        state = cur.state
        if state is State.MESSAGE_HEADER:
            cur.header += text
        elif state is State.TOOL_ARGS:
            if self._collection:
                self._collect(cur, text, out)
            else:
                out.append((Event.ARG, text, cur.index))
        else:
            event = self._content_events.get(state)
            if event is not None:
                out.append((event, text, cur.index))

    def _collect(self, cur: Cursor, text: str, out: list[Emitted]) -> None:
        """A JSON-collection body's text: calls, then content once it ends."""
        assert self._collection is not None
        body = Collection(cur.coll)
        events: list[tuple[Event, str]] = []
        end = body.feed(self._collection, text, events)
        for event, value in events:
            if event is Event.TOOL_CALL_START:
                cur.index += 1
            out.append((event, value, cur.index))
        if end is None:
            cur.coll = body.to_state()
            return
        cur.state, cur.coll = State.CONTENT, None
        if text[end:]:
            self._emit_for_state(cur, text[end:], out)

    def _apply(self, cur: Cursor, tr: Transition, value: str, out: list[Emitted]) -> None:
        header = None
        if cur.state is State.MESSAGE_HEADER:
            header, cur.header = cur.header, ""
        cur.state = tr.next_state
        if cur.state is State.TOOL_ARGS:
            cur.coll = None  # vLLM resets the argument and collection scanners
        for event in tr.events:
            if event is Event.TOOL_CALL_START:
                cur.index += 1
            text = header if header is not None and event is Event.TEXT else value
            if event is Event.TEXT and not text:
                continue
            out.append((event, text, cur.index))
