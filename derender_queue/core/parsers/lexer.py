"""Incremental literal lexer with minimal marker hold-back.

Splits text into plain-text runs and literal terminals, scanning greedily
left to right the way vLLM's ``IncrementalLexer`` tokenizes a complete
output.  Only a suffix that is still a proper prefix of some literal is held
back between chunks, so any chunking yields the same tokens as one feed.

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
        texts = sorted(literals, key=len, reverse=True)
        for a in texts:
            for b in texts:
                # Greedy scanning equals vLLM's lexer only when no literal
                # is a proper prefix of another (true for every grammar here).
                if a != b and b.startswith(a):
                    raise ValueError(f"literal {a!r} is a prefix of {b!r}")
        self._names = dict(literals)
        self._pattern = re.compile("|".join(re.escape(t) for t in texts))
        self._max_len = max(map(len, texts))
        self._first_chars = frozenset(t[0] for t in texts)
        self._prefixes = frozenset(t[:i] for t in texts for i in range(1, len(t)))

    def scan(self, held: str, text: str, *, final: bool = False) -> tuple[list[Token], str]:
        """Tokenize ``held + text``; return the tokens and the new held text.

        With ``final`` nothing is held: a trailing partial literal is text.
        """
        s = held + text
        tokens: list[Token] = []
        pos = 0
        for m in self._pattern.finditer(s):
            if m.start() > pos:
                tokens.append((None, s[pos : m.start()]))
            tokens.append((self._names[m.group()], m.group()))
            pos = m.end()
        hold_from = len(s) if final else self._hold_start(s, pos)
        if hold_from > pos:
            tokens.append((None, s[pos:hold_from]))
        return tokens, s[hold_from:]

    def _hold_start(self, s: str, pos: int) -> int:
        """Earliest index whose suffix could still grow into a literal."""
        for i in range(max(pos, len(s) - self._max_len + 1), len(s)):
            if s[i] in self._first_chars and s[i:] in self._prefixes:
                return i
        return len(s)


def partial_marker_len(text: str, marker: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of
    ``marker`` (the part to hold back until the next chunk)."""
    for k in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:k]):
            return k
    return 0
