"""How the tool pass reads its input, decided by the input's first characters.

Two vLLM 0.34 engine features look at the tool pass's whole input before
parsing it (``ParserEngine._single_pass_parse``, Llama's ``_preprocess_feed``):

* ``complete_tool_call_validator``: False makes the whole input the content,
  no calls.  The family names the prefixes it validates
  (``Grammar.validated_prefixes``; the validator returns None for any other
  input), so only input starting with one of them is held, all of it, until
  the end decides: a later malformed call turns earlier calls into content.
* ``bare_json_tool_start``: input starting with ``{`` is read as if the
  family's tool-start marker came first (not when calls are suppressed).
* ``Family.first_feed`` (Gemma 4's ``_preprocess_feed``, which also runs on
  the reasoning pass, ``reasoning.py``): the family decides from the input
  so far which marker, if any, is read first; the input is held until it
  does (at the latest, at the end).

Other input is passed on as it comes.  State: the mode and the held text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..buffer import TextBuffer
from .grammar import Grammar

UNDECIDED, HOLD, GO = 0, 1, 2

# (the input so far, whether it is all of it) -> the marker to read first
# ("" for none), or None while undecided.
FirstFeed = Callable[[str, bool], str | None]

# (marker spelling to read first or None, text to parse)
Opened = tuple[str | None, str]


class Opening:
    __slots__ = ("_bare", "_first", "_held", "_needed", "_prefixes", "_validator", "mode")

    def __init__(
        self, grammar: Grammar, *, suppress: bool, state: list[Any] | None = None, first_feed: FirstFeed | None = None,
    ) -> None:
        self._validator = grammar.complete_tool_call_validator
        self._prefixes = grammar.validated_prefixes if self._validator is not None else ()
        self._bare = None if suppress else grammar.bare_json_tool_start
        self._first = first_feed
        self._needed = bool(self._prefixes) or self._bare is not None or first_feed is not None
        self.mode: int = state[0] if state else (UNDECIDED if self._needed else GO)
        self._held = TextBuffer(state[1] if state else "")

    @staticmethod
    def needed(grammar: Grammar, *, suppress: bool, first_feed: FirstFeed | None) -> bool:
        """Whether such an Opening decides anything (else it passes every input through)."""
        validated = grammar.complete_tool_call_validator is not None and bool(grammar.validated_prefixes)
        return validated or (not suppress and grammar.bare_json_tool_start is not None) or first_feed is not None

    @property
    def decided(self) -> bool:
        """Every input passes through as it comes from now on."""
        return self.mode == GO

    def to_state(self) -> list[Any] | None:
        """None for a family that decides nothing here (no state at all)."""
        return [self.mode, self._held.dump()] if self._needed else None

    def take(self, text: str) -> Opened | None:
        """What to parse now, or None while the input is held."""
        if self.mode == GO:
            return None, text
        self._held.append(text)
        held = self._held.value()
        if self.mode == HOLD or not held:
            return None
        if self._first is not None:
            marker = self._first(held, False)
            if marker is None:
                return None
            self.mode = GO
            self._held.clear()
            return marker or None, held
        if any(held.startswith(p) for p in self._prefixes):
            self.mode = HOLD
            return None
        if any(p.startswith(held) for p in self._prefixes):
            return None  # may still become a validated prefix
        self.mode = GO
        self._held.clear()
        return self._marker(held), held

    def finish(self) -> tuple[Opened, bool]:
        """The held input to parse, and whether it is the content as it is
        (the validator refused it)."""
        held = self._held.value()
        self._held.clear()
        if self.mode == GO:
            return (None, ""), False
        self.mode = GO
        if self._first is not None:
            return (self._first(held, True) or None, held), False
        if self._validator is not None and self._validator(held) is False:
            return (None, held), True
        return (self._marker(held), held), False

    def _marker(self, text: str) -> str | None:
        return self._bare if self._bare is not None and text.startswith("{") else None
