"""Text a parser would route whole to one field and leave its state as it was.

Most chunks of a long output are plain reasoning or plain content: none of
their characters can begin a marker, and the parser's state after them is
the state before.  A stage that knows this of its current state says so with
a ``Passage``; ``ChatParser.passage`` combines its stages' answers, and the
stream (core/stream.py) then routes such a chunk without resuming the
parser, its state carried on as it came.  Anything a stage cannot vouch for
(an open call, a flag the text would flip) gives None: the chunk takes the
parser's ordinary path.

A lexer's held suffix (``holds``: a text ending in a marker's first
characters, ripple's "\n", minimax's quote) is part of the state too: the
passage reads the text the way that lexer's ``scan`` does and says what is
held after it (``split``'s second part), so the stream learns the state after
such a chunk once and the held state's own passage routes the next chunk.

A stage that holds everything its vLLM rule decides later (docs/parsers.md)
may say so with a growing passage (``holding``): text without its stops is
appended to the buffer at ``grows`` in its state and nothing is sent, so
the stream appends it there itself (``grows_by`` says whether it may; the
buffer's state is its text, or the inline rest of a stored one: spill.py).  Such a
passage must not depend on what the buffer holds, only on the rest of the
state: the stream keeps it under the state without the buffer.  A growing
passage may also send the text to its field (Cohere's block, held whole and
streamed early): then it strips, and the whitespace it holds back is in the
state as text beside the buffer (``withholds``), kept out of the key as the
buffer is; the stream reads it there and writes what the chunk leaves held.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Literal, NamedTuple, TypeVar

from .deltas import ParsedDelta
from .lexer import LiteralLexer

# The field the text goes to; "" when the parser drops it (reasoning not
# included, text after an announced call).
Field = Literal["reasoning", "content", ""]
# What a state holds back: its trailing whitespace, with each lexer's held
# suffix where one holds any (``Passage.held``, ``split``).
Held = str | tuple[str, ...]


class Passage(NamedTuple):
    field: Field
    stops: frozenset[str] = frozenset()
    """Characters that may begin a marker, or otherwise change the state."""
    strips: bool = False
    """Trailing whitespace is held back until text follows it (the state
    then differs only in what is held: `split`'s second part)."""
    lead: str = ""
    """Whitespace held back so far, sent before the next text."""
    lexers: tuple[LiteralLexer, ...] = ()
    """Lexers whose literals' first characters change the state only where
    they begin a literal or a suffix that could grow into one: a text with
    them (and none of ``stops``) passes when each lexer reads it as one plain
    run holding nothing (``LiteralLexer.plain``)."""
    holds: tuple[str | None, ...] = ()
    """Per lexer, in order (none given: all None): None where it must read
    the text as above; else the suffix it holds now, and then the text
    passes where that lexer's ``scan`` of it (after that suffix) gives plain
    runs and ``inert`` terminals only, and its new held suffix is the one
    ``split`` reports.  The lexers form a chain: what one releases is the
    next one's text (reasoning stage content into the tool stage)."""
    inert: tuple[frozenset[str], ...] = ()
    """Per lexer with a hold (``holds``): the terminals its stage reads in
    this state as their own text, leaving the state as it is."""
    grows: tuple[str, ...] = ()
    """A growing passage's buffer: its keys in the parser's state (``holding``)."""
    reach: int = 0
    """Characters before the chunk, at the buffer's end, that ``stops`` are
    also looked for in (a marker split across chunks)."""
    withholds: str = ""
    """A growing passage that sends what it grows by (and strips): the key,
    beside the buffer's, of the whitespace it holds back, as text (at most
    ``WITHHELD_MAX`` characters) in the state, its ``lead`` whatever the
    state says.  Left out of the key either way: a growing passage that does
    not strip leaves it as it is (a stage's holding passage beside its
    sending one: one lookup serves both)."""
    begins: tuple[str, ...] = ()
    """A growing passage's markers, where a stop within reach matters only
    where one of them may begin at it (Cohere's ``<``, common in text);
    none given: any stop within reach does."""

    def under(self, key: str) -> Passage:
        """A stage's growing passage as its parser's: its buffer under the stage's key."""
        return self._replace(grows=(key, *self.grows))

    def grows_by(self, buffer: str | list[Any], text: str) -> bool:
        """Whether `text` passes into the buffer (dumped as `buffer`): none
        of the stops in it or within reach before it."""
        rest = buffer if type(buffer) is str else buffer[4]
        if len(rest) < self.reach and type(buffer) is not str:
            return False  # a marker could begin in the stored text
        if not self.stops:
            return True
        stops = _stop_pattern(self.stops, ())
        if stops.search(text) is not None:  # single characters: the two parts are searched apart
            return False
        found = stops.search(rest, len(rest) - self.reach) if self.reach else None
        while found is not None:
            at = rest[found.start() :] + text
            if not self.begins or any(m[: len(at)] == at[: len(m)] for m in self.begins):
                return False
            found = stops.search(rest, found.start() + 1)
        return True

    @property
    def held(self) -> Held:
        """What this state holds back (compare ``split``'s second part)."""
        return _held(self.lead, self.holds)

    def passes(self, text: str) -> bool:
        return self.route(text) is not None

    def split(self, text: str) -> tuple[str, Held]:
        """What is sent of a passing text, and what is then held."""
        routed = self.route(text)
        assert routed is not None, "split() of a text that does not pass"
        return routed

    def route(self, text: str) -> tuple[str, Held] | None:
        """``split(text)`` where the text passes, else None: one reading."""
        read = self._reading(text) if text else None
        if read is None:
            return None
        out, holds = read
        if not self.strips:
            return out, _held("", holds) if holds else ""
        sent, ws = sent_and_held(self.lead + out)
        return sent, _held(ws, holds) if holds else ws

    def _reading(self, text: str) -> tuple[str, tuple[str | None, ...]] | None:
        if not self.stops and not self.lexers:
            return text, self.holds
        if _stop_pattern(self.stops, self.lexers).search(text) is None and not any(self.holds):
            return text, self.holds  # no character that could matter: the common chunk
        stops = _stop_pattern(self.stops, ()) if self.stops else None
        if not self.lexers or (stops is not None and stops.search(text) is not None):
            return None
        # The chain's reading: a lexer reads a terminal that is not inert, or
        # (without a hold) does not read one plain run holding nothing: None.
        # What a lexer releases may begin with what it held: no stage's stop
        # may be in it either (the stops' stage may come later).
        holds = self.holds or (None,) * len(self.lexers)
        out, after = text, list(holds)
        for i, lexer in enumerate(self.lexers):
            held = holds[i]
            if not out or (not held and lexer.plain(out)):
                continue  # a stage given no text is not fed; one plain run holding nothing
            if held is None:
                return None
            tokens, after[i] = lexer.scan(held, out)
            inert = self.inert[i]
            if any(name is not None and name not in inert for name, _ in tokens):
                return None
            out = "".join(part for _, part in tokens)
            if held and stops is not None and stops.search(out) is not None:
                return None
        return out, tuple(after)

    def delta(self, sent: str) -> ParsedDelta:
        if not sent or not self.field:
            return ParsedDelta()
        return ParsedDelta(reasoning=sent) if self.field == "reasoning" else ParsedDelta(content=sent)

    def then(self, later: Passage | None) -> Passage | None:
        """This stage's content fed to a ``later`` stage."""
        if self.field != "content":
            return self
        if later is None:
            return None
        if not self.holds and not later.holds:
            return later._replace(stops=self.stops | later.stops, lexers=self.lexers + later.lexers)
        holds = _per_lexer(self.holds, self.lexers, None) + _per_lexer(later.holds, later.lexers, None)
        inert = _per_lexer(self.inert, self.lexers, NOTHING) + _per_lexer(later.inert, later.lexers, NOTHING)
        return later._replace(stops=self.stops | later.stops, lexers=self.lexers + later.lexers, holds=holds,
                              inert=inert)


WITHHELD_MAX = 64
"""Whitespace a sending growing passage's state holds back as text (a longer
run as its length: a stream of blank lines must not grow the state)."""


def sent_and_held(text: str) -> tuple[str, str]:
    """`text` less its trailing whitespace, and that whitespace (held back until text follows it)."""
    sent = text.rstrip()
    return sent, text[len(sent) :]


NOTHING: frozenset[str] = frozenset()
"""No stop characters; no inert terminals."""


def holding(key: str, stops: frozenset[str] = NOTHING, markers: tuple[str, ...] = ()) -> Passage:
    """A stage's growing passage: its buffer's state at `key`, text with
    none of `stops` (also in the buffer's last characters a marker among
    `markers` could begin in) appended there."""
    return Passage("", stops, grows=(key,), reach=max(map(len, markers), default=1) - 1)


_T = TypeVar("_T")


def _per_lexer(given: tuple[_T, ...], lexers: tuple[LiteralLexer, ...], absent: _T) -> tuple[_T, ...]:
    return given or (absent,) * len(lexers)


def _held(ws: str, holds: tuple[str | None, ...]) -> Held:
    """Trailing whitespace alone while no lexer holds anything (a held-whitespace state's key as before)."""
    return (ws, *(h or "" for h in holds)) if any(holds) else ws


@functools.lru_cache(maxsize=256)
def _stop_pattern(stops: frozenset[str], lexers: tuple[LiteralLexer, ...]) -> re.Pattern[str]:
    chars = stops.union(*(lexer.first_chars for lexer in lexers))
    return re.compile("[" + "".join(re.escape(c) for c in sorted(chars)) + "]")
