"""Incremental literal lexer with minimal marker hold-back.

Splits text into plain-text runs and literal terminals, scanning greedily
left to right the way vLLM's ``IncrementalLexer`` tokenizes a complete
output: the longest literal at the leftmost position.  Only a suffix that
could still become (a longer) literal is held back between chunks, so any
chunking yields the same tokens as one feed.  One literal may be a prefix of
another (``<invoke name=`` / ``<invoke name="``).  A literal may also stand
inside another's proper prefix at an offset (``>`` in MiniMax M3's
``]<]minimax[>[<tool_call>``): a match of the inner one is then held while a
text that may still grow into the outer one starts before it, since that one,
leftmost, would win; once that text can no longer become a literal the inner
match is a token (``]<]minimax[`` + ``>`` + ``[x``).

The lexer is immutable; the caller owns the held text (it is part of the
caller's serializable state and never exceeds the longest literal).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# A token is (terminal name, text); the name is None for plain text.
Token = tuple[str | None, str]


class LiteralLexer:
    def __init__(self, literals: Mapping[str, str]) -> None:
        """``literals`` maps each literal's text to its terminal name."""
        texts = sorted((t for t in literals if t), key=len, reverse=True)
        # A literal inside another's prefix: a match may wait for an earlier start (scan).
        self._nested = any(inner != outer and _nested(outer, inner, texts) for outer in texts for inner in texts)
        self._names = dict(literals)
        self._pattern = re.compile("|".join(re.escape(t) for t in texts))
        self._max_len = max(map(len, texts))
        # Text without any of these scans as one plain run (passage.py).
        self.first_chars = frozenset(t[0] for t in texts)
        self._prefixes = frozenset(t[:i] for t in texts for i in range(1, len(t)))

    def scan(self, held: str, text: str, *, final: bool = False) -> tuple[list[Token], str]:
        """Tokenize ``held + text``; return the tokens and the new held text.

        With ``final`` nothing is held: a trailing partial literal is text.
        """
        s = held + text
        tokens: list[Token] = []
        pos = 0
        hold = -1  # with nested literals: the earliest index at or after pos that may start one
        for m in self._pattern.finditer(s):
            start = m.start()
            if final:
                pass
            elif self._nested:
                if hold < pos:
                    hold = self._hold_start(s, pos)
                if start >= hold:
                    break  # a literal that may still start at or before it would win
            elif len(s) - start < self._max_len and s[start:] in self._prefixes:
                break  # a longer literal may still start here
            if start > pos:
                tokens.append((None, s[pos:start]))
            tokens.append((self._names[m.group()], m.group()))
            pos = m.end()
        hold_from = len(s) if final else self._hold_start(s, pos)
        if hold_from > pos:
            tokens.append((None, s[pos:hold_from]))
        return tokens, s[hold_from:]

    def names(self) -> frozenset[str]:
        """The terminal names of its literals."""
        return frozenset(self._names.values())

    def plain(self, text: str) -> bool:
        """Whether ``scan("", text)`` is one plain run that holds nothing:
        no literal in it and no suffix that could still grow into one."""
        return self._pattern.search(text) is None and self._hold_start(text, 0) == len(text)

    def hold_start(self, s: str) -> int:
        """Where the suffix of ``s`` that could still grow into a literal starts."""
        return self._hold_start(s, 0)

    def _hold_start(self, s: str, pos: int) -> int:
        """Earliest index whose suffix could still grow into a literal."""
        for i in range(max(pos, len(s) - self._max_len + 1), len(s)):
            if s[i] in self.first_chars and s[i:] in self._prefixes:
                return i
        return len(s)


def _nested(outer: str, inner: str, texts: list[str]) -> bool:
    """``inner`` ends inside a proper prefix of ``outer`` at an offset where
    no literal starting with ``outer`` is complete yet."""
    at = outer.find(inner, 1, len(outer) - 1)
    while at > 0:
        covered = outer[: at + len(inner)]
        if not any(covered.startswith(t) for t in texts):
            return True
        at = outer.find(inner, at + 1, len(outer) - 1)
    return False


def partial_marker_len(text: str, marker: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of
    ``marker`` (the part to hold back until the next chunk)."""
    for k in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:k]):
            return k
    return 0
