"""Text a parser would route whole to one field and leave its state as it was.

Most chunks of a long output are plain reasoning or plain content: none of
their characters can begin a marker, and the parser's state after them is
the state before.  A stage that knows this of its current state says so with
a ``Passage``; ``ChatParser.passage`` combines its stages' answers, and the
stream (core/stream.py) then routes such a chunk without resuming the
parser, its state carried on as it came.  Anything a stage cannot vouch for
(a held suffix, an open call, a flag the text would flip) gives None: the
chunk takes the parser's ordinary path.
"""

from __future__ import annotations

import functools
import re
from typing import Literal, NamedTuple

from .deltas import ParsedDelta
from .lexer import LiteralLexer

# The field the text goes to; "" when the parser drops it (reasoning not
# included, text after an announced call).
Field = Literal["reasoning", "content", ""]


class Passage(NamedTuple):
    field: Field
    stops: frozenset[str]
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

    def passes(self, text: str) -> bool:
        if not text:
            return False
        if not self.stops and not self.lexers:
            return True
        if _stop_pattern(self.stops, self.lexers).search(text) is None:
            return True  # no character that could matter: the common chunk
        if not self.lexers or (self.stops and _stop_pattern(self.stops, ()).search(text) is not None):
            return False
        return all(lexer.plain(text) for lexer in self.lexers)

    def split(self, text: str) -> tuple[str, str]:
        """What is sent of a passing text, and the whitespace then held."""
        if not self.strips:
            return text, ""
        whole = self.lead + text
        sent = whole.rstrip()
        return sent, whole[len(sent) :]

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
        return later._replace(stops=self.stops | later.stops, lexers=self.lexers + later.lexers)


@functools.lru_cache(maxsize=256)
def _stop_pattern(stops: frozenset[str], lexers: tuple[LiteralLexer, ...]) -> re.Pattern[str]:
    chars = stops.union(*(lexer.first_chars for lexer in lexers))
    return re.compile("[" + "".join(re.escape(c) for c in sorted(chars)) + "]")
