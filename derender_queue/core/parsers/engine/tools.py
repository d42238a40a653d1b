"""The tool pass of an engine family (vLLM's ``extract_tool_calls_from_content``).

vLLM re-runs the family's engine over the reasoning-stripped content,
starting in ``CONTENT``.  Here that machine runs chunk by chunk; its events
fill one call slot at a time (``calls.py``) and feed the content gate
(``gate.py``).  A call's header (id, name) is sent once its name is complete,
its arguments whole when its slot ends: a later parameter with the same key,
schema coercion or the JSON fallback can rewrite any earlier part of them.

With ``tool_choice: "none"`` and tools vLLM parses the markup but drops the
calls (``suppress``).  State: the cursor, the open slot's raw name and
arguments, the call count and the gate's undecided text.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

from ..deltas import DeltaBuilder, ParsedDelta, ToolCallDelta
from ..ids import make_tool_call_id
from ..passage import Passage
from ..schema import Tools
from .calls import Accept, NameRule, Slot, make_accept, vllm_name
from .family import ArgsRewrite
from .gate import ContentGate
from .grammar import TOOL_EVENTS, ArgConverter, Event, State
from .machine import Cursor, Emitted, Machine
from .opening import FirstFeed, Opening
from .unfinished import UnfinishedHold


class EngineToolStage:
    def __init__(
        self, machine: Machine, *, tools: Tools, suppress: bool, legacy: bool, whole: bool = False,
        state: dict[str, Any] | None = None, args_rewrite: ArgsRewrite | None = None,
        name_rule: NameRule = vllm_name, auto: bool = True, first_feed: FirstFeed | None = None,
    ) -> None:
        g = machine.grammar
        self._machine = machine
        self._tools = tools
        self._suppress = suppress
        self._converter = g.arg_converter
        self._json_envelope = g.json_envelope
        self._args_json = g.args_json
        self._legacy = legacy
        s = state or {}
        cur, slot = s.get("c"), s.get("slot")
        self._cur = Cursor(State.CONTENT) if cur is None else Cursor.from_state(cur)
        self._slot = None if slot is None else Slot.from_state(slot)
        self._calls: int = s.get("n", 0)
        self._rewrite = args_rewrite
        self._rule = name_rule
        self._names: dict[str, str] = s.get("names", {})  # raw-args digest -> first call's name
        self._gate = ContentGate(legacy=legacy, strip=g.strip_content_whitespace_with_tools, whole=whole,
                                 state=s.get("g"), drop=g.drop_whitespace_only_content_before_tools, auto=auto,
                                 keep_post=g.content_after_calls)
        # No Opening for a family that decides nothing before its input (most): a stage is built per chunk.
        needed = Opening.needed(g, suppress=suppress, first_feed=first_feed)
        self._opening = Opening(g, suppress=suppress, state=s.get("o"), first_feed=first_feed) if needed else None
        self._markers = machine.markers
        # Grammar.calls_reopen: a slot closes at the next call or the end, and
        # announces (vLLM's delta, which drops the text after calls) only on
        # its arguments or a TOOL_CALL_END, as PLaMo 3's does.
        self._reopen = g.calls_reopen
        cut = g.unfinished_marker
        self._um = None if cut is None else UnfinishedHold(machine.lexer, cut, s.get("um", ""))

    @functools.cached_property
    def _accept(self) -> Accept:
        """The call-name check, made when a call needs it (not every chunk)."""
        g = self._machine.grammar
        return make_accept(self._tools, g.validate_tool_names, g.accept_empty_tool_names)

    def to_state(self) -> dict[str, Any]:
        return {
            "c": self._cur.to_state(),
            "slot": None if self._slot is None else self._slot.to_state(),
            "n": self._calls,
            "g": self._gate.to_state(),
            **({"names": self._names} if self._names else {}),
            **({"um": self._um.held} if self._um is not None and self._um.held else {}),
        } | ({} if self._opening is None or (o := self._opening.to_state()) is None else {"o": o})

    def passage(self) -> Passage | None:
        """Content text without a marker's first character, outside any
        call, when it leaves this stage's state as it is (passage.py)."""
        cur = self._cur
        undecided = self._opening is not None and not self._opening.decided
        # (an UnfinishedHold holding nothing passes text without the stops whole)
        # (without one, a held suffix is read on by the lexer's scan: Passage.holds)
        if undecided or (self._um is not None and (self._um.held or cur.held)) or self._slot is not None:
            return None
        if cur.state is not State.CONTENT or self._machine.grammar.content_events.get(State.CONTENT) is not Event.TEXT:
            return None
        if self._um is not None:
            return self._gate.passage(self._machine.lexer)
        return self._gate.passage(self._machine.lexer, cur.held, self._machine.inert(State.CONTENT))

    def feed(self, text: str) -> ParsedDelta:
        out = DeltaBuilder()
        opened = (None, text) if self._opening is None else self._opening.take(text)
        if opened is not None:
            self._parse(*opened, out)
        return out.build()

    def _parse(self, marker: str | None, text: str, out: DeltaBuilder) -> None:
        if marker is not None:  # read first, but not part of the raw input
            self._token((self._markers[marker], marker), out, raw=False)
        tokens, self._cur.held = self._machine.lexer.scan(self._cur.held, text)
        for token in tokens:
            self._token(token, out)

    def finish(self, input_is_none: bool) -> tuple[ParsedDelta, bool]:
        """Flush; also returns whether empty content means None (not "")."""
        out = DeltaBuilder()
        opened, refused = ((None, ""), False) if self._opening is None else self._opening.finish()
        if refused:  # complete_tool_call_validator: the input is the content
            out.content(opened[1])
            return out.build(), True
        self._parse(*opened, out)
        tokens, self._cur.held = self._machine.lexer.scan(self._cur.held, "", final=True)
        for token in tokens:
            self._token(token, out)
        self._events(self._machine.finish(self._cur), out)
        if self._slot is not None:  # Grammar.calls_reopen: the last call closes here
            self._end_slot(out)
        if self._um is not None:
            self._flush_unfinished(out)
        engine_content = self._gate.finish(out)
        return out.build(), engine_content or input_is_none

    def _token(self, token: tuple[str | None, str], out: DeltaBuilder, raw: bool = True) -> None:
        events = self._machine.run(self._cur, [token])
        if self._legacy and raw:
            identity = not self._gate.started and len(events) == 1 and events[0][:2] == (Event.TEXT, token[1])
            if not identity and self._um is not None and self._um.held:
                self._gate.raw_extra(self._um.held)  # input the content filter still holds
            self._gate.raw(token[1], identity)
        if self._um is not None and self._um.held and not self._gate.started and not self._suppress and any(
            event in TOOL_EVENTS for event, _, _ in events
        ):
            self._flush_unfinished(out, at_call=True)
        self._events(events, out)
        slot = self._slot
        if slot is not None and slot.header is None and self._cur.state is not State.TOOL_NAME:
            self._maybe_header(slot, out)

    def _events(self, events: list[Emitted], out: DeltaBuilder) -> None:
        for event, text, _index in events:
            if event is Event.TEXT:
                if self._um is not None:
                    text = self._um.take(text)
                self._gate.text(text, out)
            elif event in TOOL_EVENTS and not self._suppress:
                self._gate.tool_event(slot=event is Event.TOOL_CALL_START)
                self._call_event(event, text, out)

    def _flush_unfinished(self, out: DeltaBuilder, at_call: bool = False) -> None:
        """The content field ends: at the end, or (``at_call``) at the first
        call event, where it ends if a call is announced (then the text after
        is dropped) and else goes on with that text, so a cut part stays held."""
        assert self._um is not None
        held = self._um.held
        if text := self._um.flush():
            self._gate.text(text, out)
        cut = held[len(text) :]
        if at_call:
            self._um.held = cut
        elif cut and self._legacy:
            self._gate.raw_extra(cut)  # the raw answer keeps what vLLM's engine reading cut

    def _call_event(self, event: Event, text: str, out: DeltaBuilder) -> None:
        if event is Event.TOOL_CALL_START:
            if self._slot is not None:
                self._end_slot(out)
            self._slot = Slot()
        elif self._slot is None:
            return  # text for a call that already ended (refused by check_call_order)
        elif event is Event.TOOL_NAME:
            self._slot.name.append(text)
        elif event is Event.ARG:
            self._slot.args.append(text)
            if self._reopen and self._accept(self._rule(self._slot.name.value(), None, self._accept)):
                self._gate.announced(out)  # _handle_arg_chunk's name delta
        elif not self._reopen:
            self._end_slot(out)
        elif self._slot.announces(self._accept, self._rule):
            self._gate.announced(out)  # _handle_tool_end's delta; the slot stays open

    def _maybe_header(self, slot: Slot, out: DeltaBuilder) -> None:
        name = slot.final_name(self._accept, self._rule)
        if name is None:
            return  # no name yet, or a nameless call: decided at its end
        slot.header = self._next_index()
        out.tool_calls.append(ToolCallDelta(slot.header, id=make_tool_call_id(), name=name))
        if not self._reopen and slot.announces(self._accept, self._rule):
            self._gate.announced(out)
        self._gate.called(out)

    def _end_slot(self, out: DeltaBuilder) -> None:
        slot, self._slot = self._slot, None
        assert slot is not None
        if not self._reopen and slot.announces(self._accept, self._rule):
            self._gate.announced(out)
        call = slot.call(self._slot_converter(slot), self._tools, self._accept, self._rule,
                         json_envelope=self._json_envelope, args_json=self._args_json,
                         envelope_keys=self._machine.grammar.envelope_arg_keys)
        if call is None:
            return
        name, args = call
        if slot.header is not None:
            out.tool_calls.append(ToolCallDelta(slot.header, arguments=args))
        else:
            out.tool_calls.append(ToolCallDelta(self._next_index(), id=make_tool_call_id(), name=name, arguments=args))
        self._gate.called(out)

    def _slot_converter(self, slot: Slot) -> ArgConverter | None:
        """The grammar's converter, followed by the family's ``args_rewrite``
        with vLLM's name for these arguments (``family.ArgsRewrite``)."""
        base, rewrite = self._converter, self._rewrite
        if base is None or rewrite is None:
            return base
        raw_args = slot.args.value()
        key = hashlib.sha1(raw_args.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        # vLLM's slot.name when the call ends (calls.NameRule).
        name = self._names.setdefault(key, slot.end_name(self._accept, self._rule))
        tools = self._tools

        def convert(raw: str) -> str:
            return rewrite(base(raw), tools, name)

        return convert

    def _next_index(self) -> int:
        index = self._calls
        self._calls += 1
        return index
