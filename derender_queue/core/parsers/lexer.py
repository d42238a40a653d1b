"""Incremental literal lexer with minimal marker hold-back.

Splits text into plain-text runs and literal terminals, scanning greedily
left to right the way vLLM's ``IncrementalLexer`` tokenizes a complete
output: the longest literal at the leftmost position.  Only a suffix that
could still become (a longer) literal is held back between chunks, so any
chunking yields the same tokens as one feed.  One literal may be a prefix of
another (``<invoke name=`` / ``<invoke name="``); a literal inside another's
proper prefix at an offset (``ab`` in ``xaby``) is refused, as no held
suffix could decide it, unless a literal already matches where the outer one
starts once the inner one is complete (``\n<t>`` in ``\n<t>\n`` beside
``<t>``: ripple's markers with their optional framing newlines), as the
hold then keeps the outer one's start.

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
        for outer in texts:
            for inner in texts:
                if inner != outer and _undecidable(outer, inner, texts):
                    raise ValueError(f"literal {inner!r} occurs inside {outer!r}")
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
            start = m.start()
            if not final and len(s) - start < self._max_len and s[start:] in self._prefixes:
                break  # a longer literal may still start here
            if start > pos:
                tokens.append((None, s[pos:start]))
            tokens.append((self._names[m.group()], m.group()))
            pos = m.end()
        hold_from = len(s) if final else self._hold_start(s, pos)
        if hold_from > pos:
            tokens.append((None, s[pos:hold_from]))
        return tokens, s[hold_from:]

    def hold_start(self, s: str) -> int:
        """Where the suffix of ``s`` that could still grow into a literal starts."""
        return self._hold_start(s, 0)

    def _hold_start(self, s: str, pos: int) -> int:
        """Earliest index whose suffix could still grow into a literal."""
        for i in range(max(pos, len(s) - self._max_len + 1), len(s)):
            if s[i] in self._first_chars and s[i:] in self._prefixes:
                return i
        return len(s)


def _undecidable(outer: str, inner: str, texts: list[str]) -> bool:
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
