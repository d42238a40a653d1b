"""The reasoning pass of an engine family (vLLM's ``extract_reasoning``).

vLLM runs the family's engine over the whole output with tool parsing
skipped: reasoning is the ``REASONING`` event text (``rstrip()``-ed when the
grammar says so), content the ``TEXT`` event text, either None when empty.
Here the same machine runs chunk by chunk.  State: the machine's cursor
(lexer hold < the longest terminal) and, with stripping, the trailing
reasoning whitespace; with ``Family.first_feed`` the input held until the
family decides its first marker (``opening.py``), with
``Family.reasoning_prefix`` the reasoning while it may still be that prefix.
"""

from __future__ import annotations

from typing import Any

from ..buffer import TextBuffer
from ..passage import Passage
from .grammar import Event, State
from .machine import Cursor, Emitted, Machine
from .opening import FirstFeed, Opening
from .unfinished import UnfinishedHold

# States whose plain text is one event (a header or a call's arguments are not).
_PLAIN = frozenset({State.REASONING, State.CONTENT})


class EngineReasoningStage:
    reasoning_nullable = True

    def __init__(
        self, machine: Machine, initial: State, *, raw: bool, state: dict[str, Any] | None = None,
        lstrip_newlines: bool = False, force_content: bool = False, drop_reasoning: bool = False,
        first_feed: FirstFeed | None = None, prefix: str = "",
    ) -> None:
        self._machine = machine
        self._drop = drop_reasoning  # Family.reasoning_without_thinking: reasoning text is dropped
        self._raw = raw  # thinking off and the family returns the output as is
        # vLLM: (None, output) -> content "" stays "", not None (unless newlines are stripped: "" or None).
        self.content_nullable = not raw or lstrip_newlines
        self._strip = machine.grammar.strip_trailing_reasoning_whitespace
        self._lstrip = lstrip_newlines  # Family.content_lstrip_newlines
        self._force = force_content and not raw  # Family.swap_absent_content_only: a turn without content swaps
        s = state or {}
        cur = s.get("c")
        self._cur = Cursor(initial) if cur is None else Cursor.from_state(cur)
        self._ws: str = s.get("ws", "")
        # The hooks' state is read only where a hook is on: a stage is rebuilt every chunk.
        hooked = self._lstrip or self._force
        self._started: bool = hooked and s.get("cs", False)  # content other than leading newlines was sent
        self._seen: bool = hooked and s.get("seen", False)  # any content text (the swap's test)
        self._held = TextBuffer(s.get("hr", "") if hooked else "")  # reasoning held while a swap may come
        self._opening = None if first_feed is None else Opening(machine.grammar, suppress=True, state=s.get("o"),
                                                                 first_feed=first_feed)
        self._prefix = prefix
        self._pre: str | None = s.get("p", "") if prefix else ""  # may still be the prefix; None once decided
        cut = machine.grammar.unfinished_marker  # PLaMo 3: the reasoning loses an unfinished marker
        self._um = None if cut is None else UnfinishedHold(machine.lexer, cut, s.get("um", ""))

    def to_state(self) -> dict[str, Any]:
        out: dict[str, Any] = {"c": self._cur.to_state(), "ws": self._ws}
        if self._lstrip or self._force:
            out |= {"cs": self._started, "seen": self._seen, "hr": self._held.dump()}
        if self._opening is not None:
            out["o"] = self._opening.to_state()
        if self._prefix:
            out["p"] = self._pre
        if self._um is not None and self._um.held:
            out["um"] = self._um.held
        return out

    def passage(self) -> Passage | None:
        """Where text without a marker's first character goes, when it
        leaves this stage's state as it is (passage.py)."""
        # _hooks leaves content as it is once it saw content other than
        # leading newlines and holds no reasoning; reasoning, unless a swap
        # (force_content) may still hold it.
        hooked = self._lstrip or self._force
        content_hooked = hooked and not (self._seen and (self._started or not self._lstrip) and not self._held)
        if self._raw:
            return None if content_hooked else Passage("content")
        cur = self._cur
        opening = self._opening
        # An UnfinishedHold holding nothing passes text without the lexer's
        # first characters (the stops) whole: it holds from such a character.
        # Without one, a suffix the lexer holds is only that: the text after
        # it is read by the lexer's scan (Passage.holds, its state's inert terminals).
        if (opening is not None and not opening.decided) or (self._prefix and self._pre is not None) or \
                (self._um is not None and (self._um.held or cur.held)):
            return None
        event = self._machine.grammar.content_events.get(cur.state) if cur.state in _PLAIN else None
        if event is None:
            return None
        lexers = (self._machine.lexer,)  # text the lexer reads as plain
        held: tuple[str | None, ...] = () if self._um is not None else (cur.held,)
        inert = () if self._um is not None else (self._machine.inert(cur.state),)
        if event is Event.TEXT:
            return None if content_hooked else Passage("content", lexers=lexers, holds=held, inert=inert)
        if event is not Event.REASONING or (self._force and not (self._seen and not self._held)):
            return None
        if self._drop:
            return Passage("", lexers=lexers, holds=held, inert=inert)
        return Passage("reasoning", strips=self._strip, lead=self._ws, lexers=lexers, holds=held, inert=inert)

    def feed(self, text: str) -> tuple[str, str]:
        if self._raw:
            return self._hooks("", text)
        if self._opening is None:
            events = self._machine.feed(self._cur, text)
        else:
            opened = self._opening.take(text)
            events = [] if opened is None else self._opened(*opened)
        if not (self._lstrip or self._force or self._prefix):  # most families: no hook to run
            return self._split(events)
        return self._hooks(*self._strip_prefix(*self._split(events), final=False))

    def finish(self) -> tuple[str, str]:
        if self._raw:
            return "", ""
        events = [] if self._opening is None else self._opened(*self._opening.finish()[0])
        events += self._machine.finish(self._cur)
        reasoning, content = self._hooks(*self._strip_prefix(*self._split(events, final=True), final=True))
        self._ws = ""  # trailing reasoning whitespace is stripped
        if self._force and not self._seen:  # no content: the reasoning is the content
            held, self._held = self._held.value() + reasoning, TextBuffer()
            return "", held
        return reasoning, content

    def _opened(self, marker: str | None, text: str) -> list[Emitted]:
        """The input, with the marker ``Family.first_feed`` reads first."""
        events = [] if marker is None else self._machine.run(self._cur, [(self._machine.markers[marker], marker)])
        return events + self._machine.feed(self._cur, text)

    def _strip_prefix(self, reasoning: str, content: str, *, final: bool) -> tuple[str, str]:
        """``Family.reasoning_prefix``: dropped from the reasoning's start; a
        reasoning that is that prefix rstripped is dropped whole."""
        if not self._prefix or self._pre is None:
            return reasoning, content
        text, prefix = self._pre + reasoning, self._prefix
        if text.startswith(prefix):
            self._pre = None
            return text[len(prefix) :], content
        if not final and prefix.startswith(text):
            self._pre = text
            return "", content
        self._pre = None
        return ("" if final and text == prefix.rstrip() else text), content

    def _hooks(self, reasoning: str, content: str) -> tuple[str, str]:
        """The family's additions to vLLM's extract_reasoning: leading
        newlines of the content dropped; reasoning held while no content came
        (with ``force_content``, Granite 4.2's swap, a turn without content
        makes it the content)."""
        if content:
            self._seen = True
        if self._lstrip and not self._started and content:
            content = content.lstrip("\n")
            self._started = bool(content)
        if self._force:
            if not self._seen:
                self._held.append(reasoning)
                return "", content
            if self._held:
                reasoning, self._held = self._held.value() + reasoning, TextBuffer()
        return reasoning, content

    def _split(self, events: list[tuple[Event, str, int]], final: bool = False) -> tuple[str, str]:
        if len(events) == 1:  # a token's worth of text, the common chunk
            event, one, _ = events[0]
            text = one if event is Event.REASONING and not self._drop else ""
            said = one if event is Event.TEXT else ""
        else:
            reasoning: list[str] = []
            content: list[str] = []
            for event, part, _ in events:
                if event is Event.REASONING:
                    if not self._drop:
                        reasoning.append(part)
                elif event is Event.TEXT:
                    content.append(part)
            text, said = "".join(reasoning), "".join(content)
        if self._um is not None:
            text = self._um.take(text) + (self._um.flush() if final else "")
        return self._hold_trailing_ws(text), said

    def _hold_trailing_ws(self, reasoning: str) -> str:
        if not self._strip or not reasoning:
            return reasoning
        text = self._ws + reasoning
        kept = text.rstrip()
        self._ws = text[len(kept) :]
        return kept
