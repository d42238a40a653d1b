"""``Grammar.unfinished_marker`` over a whole field: PLaMo 3's
``_strip_unfinished_marker`` cuts the text from the field's last marker
start when its token ids are a proper prefix of a terminal's.

Such a tail is a proper prefix of a literal, so a field's text is released
up to the longest suffix that could still be one (the lexer's own hold
rule); the held tail is cut or released when the field ends.  The reasoning
pass holds its reasoning, the tool pass its content (vLLM's passes strip
those two fields).
"""

from __future__ import annotations

from collections.abc import Callable

from ..lexer import LiteralLexer


class UnfinishedHold:
    __slots__ = ("_cut", "_lexer", "held")

    def __init__(self, lexer: LiteralLexer, cut: Callable[[str], int | None], held: str = "") -> None:
        self._lexer = lexer
        self._cut = cut
        self.held = held

    def take(self, text: str) -> str:
        """The field's next text; returns what can no longer be cut."""
        s = self.held + text
        start = self._lexer.hold_start(s)
        self.held = s[start:]
        return s[:start]

    def flush(self, cut: bool = True) -> str:
        """The field ends: its held tail, less an unfinished marker (``cut``)."""
        s, self.held = self.held, ""
        start = self._cut(s) if cut else None
        return s if start is None else s[:start]
