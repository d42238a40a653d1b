"""Cohere Command 3 / 4 (``cohere_command3``, ``cohere_command4``): vLLM 0.34's
``CohereCommandParser`` as one stage for both passes.  ::

    <|START_THINKING|>plan<|END_THINKING|><|START_RESPONSE|>The sky is <co>blue</co: 0:[1]>.<|END_RESPONSE|>
    <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "search", "parameters": {"q": "x"}}]<|END_ACTION|>

Not an engine family: vLLM hands the whole output to ``cohere_melody``'s Rust
filter (``PyFilter(PyFilterOptions().cmd3())`` / ``.cmd4()``,
``process_full_text``), a mode machine whose text handlers (trimming, inline
citations, a JSON action scanner that counts a call at every ``}``) are no
grammar of terminals.  ``MelodyFilter`` (``cohere_filter.py``) is that filter for the two presets
(cohere_melody 0.15.3, ``src/parsing/filter.rs``, ``citations_filter.rs``,
``action_filter.rs``), written here: no dependency on the package.

``process_full_text`` cuts the output after every marker and hands each piece
to the filter, so a block's text is decided when the marker that ends it (or
the output) comes: the stage holds the text since the last marker (one
block: a reasoning, an answer, an action list) and feeds it when it closes,
streaming an answer or reasoning block early up to its first ``<``
(``CohereStage._stream_early``).  The preset picks the markers and the first mode: Command 3 starts
in the answer (``<|START_RESPONSE|>``), Command 4 in reasoning
(``<|START_TEXT|>``; its prompt opens the thinking).  The parser's preset is
the reasoning parser's when there is one (vLLM's ``shim``).  Citations are
dropped from the text (vLLM's chat answer has no field for them).
"""

from __future__ import annotations

from typing import Any

from .buffer import TextBuffer
from .cohere_filter import ANSWER, REASON, WS, MelodyFilter, find_marker
from .deltas import ParsedDelta, ToolCallDelta
from .ids import make_tool_call_id
from .passage import WITHHELD_MAX, Field, Passage, holding

# Every marker begins with "<", which also ends what a block streams early;
# Python's rstrip() (a passage's) also strips these four, melody's does not.
_STOPS = frozenset("<")
_SENDING_STOPS = _STOPS | frozenset("\x1c\x1d\x1e\x1f")


class CohereStage:
    """Both passes: the text since the last marker is held; each piece
    ``process_full_text`` would cut goes to the filter when its marker comes.
    An answer or reasoning block streams early up to its first ``<`` (and
    its last non-blank character): whatever follows, melody's text for the
    block starts with it, unless an open citation of an earlier block
    carries over (``MelodyFilter.cit``), which holds the block.  Calls are
    sent whole when their action list's marker (or the end) comes: melody's
    aggregation keeps the last id and name of each index.  A chunk without
    "<" only grows the held text, and is sent as well while the block
    streams early: the stage's passage, so the stream need not resume it."""

    def __init__(self, preset: str, *, tools: bool, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self._filter = MelodyFilter(preset, s.get("f"))
        self._tools = tools
        # The text since the last marker.  (Its key is not "held", as before
        # `ws`: there a state that had sent nothing read "to" as 0, here as the
        # held text's end; such a state is refused as another shape, never misread.)
        self._held = TextBuffer(s.get("block", ""))
        # The open block's text sent early: where it ends in the held text
        # (`_early_to`), how much that is (`_early`), and whether a "<" ended
        # what may be sent so.  While it streams, the state says where it ends
        # by the whitespace withheld after it (`ws`), and how much the block's
        # start trimmed (`lead`; None while nothing is sent), so a chunk of
        # plain text changes only the held text and `ws`: the stage's passage.
        ws: str | int | None = s.get("ws")
        self._ws: str | None = ws if isinstance(ws, str) else None if ws else ""  # None: only its length is known
        withheld = len(ws) if isinstance(ws, str) else ws
        self._early_to: int = s.get("at", 0) if withheld is None else len(self._held) - withheld
        lead: int | None = s.get("lead")
        self._early: int = 0 if lead is None else self._early_to - lead
        self._early_done: bool = s.get("done", False)
        # index -> [id, name, arguments] of the calls not yet sent
        self._calls: dict[str, list[str]] = s.get("calls", {})
        self._sent: int = s.get("sent", 0)
        self._reach = max(map(len, self._filter.markers), default=1) - 1

    def to_state(self) -> dict[str, Any]:
        ws: str | int | None = None
        if self._streams() and not self._early_done:
            assert self._ws is not None and len(self._ws) == len(self._held) - self._early_to
            ws = self._ws if len(self._ws) <= WITHHELD_MAX else len(self._ws)
        lead = self._early_to - self._early if self._early else None
        return {"f": self._filter.to_state(), "block": self._held.dump(), "lead": lead, "ws": ws,
                "at": 0 if ws is not None else self._early_to, "done": self._early_done, "calls": self._calls,
                "sent": self._sent}  # fmt: skip

    def passage(self) -> Passage | None:
        """A chunk without "<" grows the held text; while the block streams
        early, it is also sent (less trailing whitespace, as
        ``_stream_early``)."""
        if not self._streams() or self._early_done:  # (`ws` left out of the key, as when it streams)
            markers = tuple(self._filter.markers)
            return holding("block", _STOPS, markers)._replace(withholds="ws", begins=markers)
        if not self._early:
            return None  # the block's first text may be trimmed, and sets `lead`
        field: Field = "reasoning" if self._filter.mode == REASON else "content"
        return Passage(field, _SENDING_STOPS, strips=True, grows=("block",), reach=self._reach, withholds="ws")

    def feed(self, text: str) -> ParsedDelta:
        out = ParsedDelta()
        # A marker found in an earlier chunk's text would have been cut there:
        # only the new text and the characters before it a marker can begin in are searched.
        window = self._held.tail(self._reach) + text
        base = len(self._held) - (len(window) - len(text))
        self._held.append(text)
        while (found := find_marker(window, self._filter.markers)) is not None:
            end = base + found[0] + len(found[1])
            held = self._held.value()
            piece, window, base = held[:end], held[end:], 0
            self._held = TextBuffer(window)
            events = ParsedDelta()
            self._filter.write(piece, events)
            self._take(events, out, piece)
            self._reach = max(map(len, self._filter.markers), default=1) - 1
        self._stream_early(out)
        self._send_calls(out, everything=False)  # a later action list continues the open call
        return out

    def finish(self) -> ParsedDelta:
        out = ParsedDelta()
        events = ParsedDelta()
        piece = self._held.value()
        if piece:
            self._held = TextBuffer()
            self._filter.write(piece, events)
        self._filter.finish(events)
        self._take(events, out, piece)
        self._send_calls(out, everything=True)
        return out

    def _stream_early(self, out: ParsedDelta) -> None:
        """The open block's text up to its first "<" and its last non-blank
        character (left-trimmed where the filter trims), as it grows."""
        f = self._filter
        if not self._streams() or self._early_done:
            return
        region = self._held.tail(len(self._held) - self._early_to)  # not sent yet
        cut = region.find("<")
        if cut >= 0:
            region, self._early_done = region[:cut], True
        if f.left_trim and not self._early:
            trimmed = region.lstrip(WS)
            self._early_to += len(region) - len(trimmed)
            region = trimmed
        new = region.rstrip(WS)
        self._ws = region[len(new) :]
        if not new:
            return
        self._early += len(new)
        self._early_to += len(new)
        if f.mode == REASON:
            out.reasoning = (out.reasoning or "") + new
        else:
            out.content = (out.content or "") + new

    def _streams(self) -> bool:
        """Whether the open block streams early: an answer or reasoning, no
        citation carried over, nothing the filter holds."""
        f = self._filter
        return f.mode in (ANSWER, REASON) and f.cit is None and not f.buf

    def _block_text(self, text: str | None, piece: str) -> str | None:
        """A closed block's text less what ``_stream_early`` sent of it."""
        if text is None or not self._early:
            return text
        sent = piece[self._early_to - self._early : self._early_to]
        assert text.startswith(sent), "melody's block text starts with its safe prefix"
        return text[self._early :] or None

    def _take(self, events: ParsedDelta, out: ParsedDelta, piece: str) -> None:
        if events.reasoning is not None and events.content is not None:
            raise AssertionError("one block is one mode")
        out.extend(ParsedDelta(reasoning=self._block_text(events.reasoning, piece),
                               content=self._block_text(events.content, piece)))
        self._early = self._early_to = 0  # the block closed
        self._early_done = False
        for ev in events.tool_calls:
            call = self._calls.setdefault(str(ev.index), ["", "", ""])
            if ev.id:
                call[0] = ev.id
            if ev.name:
                call[1] = ev.name
            call[2] += ev.arguments or ""

    def _send_calls(self, out: ParsedDelta, *, everything: bool) -> None:
        for key in sorted(self._calls, key=int):
            index = int(key)
            if not everything and index >= self._filter.call:
                break
            call_id, name, args = self._calls.pop(key)
            if self._tools:
                out.tool_calls.append(ToolCallDelta(self._sent, id=call_id or make_tool_call_id(), name=name))
                out.tool_calls.append(ToolCallDelta(self._sent, arguments=args))
                self._sent += 1
