"""The tool pass's content, decided as early as vLLM's rules allow.

vLLM 0.34's non-streaming content after an engine tool pass
(``_events_to_delta`` + ``_single_pass_parse`` + ``DelegatingParser``):

* text before the first tool event (``pre``), plus the text after it
  (``post``) unless some call slot produced a delta (``announced``);
* that is ``""`` when it is only whitespace and a call was started;
* ``strip()``-ed when a call was accepted (``called``; the family flag
  ``strip_content_whitespace_with_tools``, else whitespace-only becomes "");
* whitespace-only content beside call slots is "" too, unless
  ``drop_whitespace_only_content_before_tools`` is off; then it is "" only
  beside a call and outside ``tool_choice: "none"`` (``_extract_tool_calls``'
  auto branch turns blank content into None, its "none" branch does not);
* in a "legacy" composition (a reasoning parser that is not engine based in
  front) a turn without accepted calls returns the raw input instead.

A prefix of that is sent as soon as no later event can change it: ``pre``
up to its last non-space character, once it has one.  So trailing whitespace
waits for the next text.  Leading whitespace (common after
``</think>\\n\\n``) is the one exception: a later call would strip it, but
holding it would hold the whole content, so it is sent with the first
non-space text, as vLLM's own stream sends it (a documented difference from
the folded-stream rule, docs/parsers.md).  ``post`` waits for the first delta-producing slot (then
it is dropped) or the end.  In legacy mode, from the first token the engine
reads differently from the raw text, both readings wait for the first
accepted call or the end.
"""

from __future__ import annotations

from typing import Any

from ..buffer import TextBuffer
from ..deltas import DeltaBuilder
from ..lexer import LiteralLexer
from ..passage import NOTHING, Passage

_FRESH: dict[str, Any] = {"post": False, "slots": False, "called": False, "ann": False, "first": None, "hold": "",
                          "posttext": "", "raw": None}


class ContentGate:
    __slots__ = ("_announced", "_auto", "_called", "_drop", "_first", "_hold", "_keep_post", "_legacy", "_post", "_raw",
                 "_slots", "_strip", "_whole", "started")

    def __init__(
        self, *, legacy: bool, strip: bool, whole: bool = False, state: dict[str, Any] | None = None, drop: bool = True,
        auto: bool = True, keep_post: bool = False,
    ) -> None:
        self._legacy = legacy
        # Grammar.content_after_calls: once a slot produced a delta, ``pre``
        # (blank: dropped) and the text after continue as one content.
        self._keep_post = keep_post
        self._strip = strip  # strip_content_whitespace_with_tools
        self._drop = drop  # drop_whitespace_only_content_before_tools
        self._auto = auto  # the serving layer's auto branch: blank content beside calls is None
        self._whole = whole  # the non-streaming parse: leading whitespace waits for the end too
        s = state or _FRESH  # a resumed state has every key (stream_state.expand)
        self.started: bool = s["post"]  # a tool event was seen
        self._slots: bool = s["slots"]
        self._called: bool = s["called"]
        self._announced: bool = s["ann"]
        # None: no pre text but whitespace yet; True: pre has non-space text (sending).
        self._first: bool | None = s["first"]
        self._hold = TextBuffer(s["hold"])
        self._post = TextBuffer(s["posttext"])
        raw = s["raw"]
        self._raw = None if raw is None else TextBuffer(raw)

    def to_state(self) -> dict[str, Any]:
        return {
            "post": self.started, "slots": self._slots, "called": self._called, "ann": self._announced,
            "first": self._first, "hold": self._hold.dump(), "posttext": self._post.dump(),
            "raw": None if self._raw is None else self._raw.dump(),
        }  # fmt: skip

    def passage(self, lexer: LiteralLexer, held: str | None = None, inert: frozenset[str] = NOTHING) -> Passage | None:
        """Where a text event goes when it leaves the gate as it is: sent
        whole (content already flowing, nothing held), or dropped (after an
        announced call); ``held``, ``inert``: the stage's lexer's (Passage.holds)."""
        if self._raw is not None and not self._called:
            return None  # legacy: both readings are held
        if self.started and self._legacy and not self._called:
            return None  # the raw reading parts from the engine's here (raw())
        if self.started and not (self._keep_post and self._announced):
            return None if not self._announced else Passage("", lexers=(lexer,), **_holds(held, inert))
        if self._first is not True or (self._hold and not self._strip):
            return None
        # (held: trailing whitespace; text the lexer reads as plain is one text event)
        return Passage("content", strips=self._strip, lead=self._hold.value(), lexers=(lexer,),
                       **_holds(held, inert))

    # ── inputs ───────────────────────────────────────────────────────

    def raw(self, text: str, identity: bool) -> None:
        """Legacy mode: one token's raw input text, before its events;
        ``identity`` when the engine reads it as that same content text."""
        if not self._legacy or self._called:
            return
        if self._raw is None:
            if identity:
                return
            self._raw = TextBuffer(self._hold.value())
        self._raw.append(text)

    def raw_extra(self, text: str) -> None:
        """Legacy mode: input text the engine reading cut (PLaMo 3's unfinished
        marker), which the raw reading keeps; the two readings differ from here."""
        if self._legacy and not self._called and self._raw is None:
            self._raw = TextBuffer(self._hold.value() + text)

    def text(self, text: str, out: DeltaBuilder) -> None:
        if not self.started or (self._keep_post and self._announced):
            self._hold.append(text)
            self._release(out)
        elif not self._announced:
            self._post.append(text)

    def tool_event(self, *, slot: bool) -> None:
        self.started = True
        self._slots = self._slots or slot

    def announced(self, out: DeltaBuilder) -> None:
        """A slot produced a delta: text after the first tool event is dropped."""
        if self._keep_post:
            if not self._announced:
                self._announced = True
                if not self._first and self._drop and not self._hold.value().strip():
                    self._hold.clear()  # blank pre beside a call slot: ""
                self._hold.append(self._post.value())
                self._post.clear()
                self._release(out)
            return
        self._announced = True
        self._post.clear()
        self._settle(out)

    def called(self, out: DeltaBuilder) -> None:
        """A call was accepted: the content may be stripped; no raw fallback."""
        self._called = True
        self._raw = None
        self._settle(out)

    def _settle(self, out: DeltaBuilder) -> None:
        """Called and announced: the content is ``pre`` alone, final now."""
        if not (self._called and self._announced) or (self._first is True and not self._hold) or self._keep_post:
            return
        text = self._hold.value()
        if self._strip:
            text = text.rstrip() if self._first else text.strip()
        elif not self._first and not text.strip() and (self._auto or self._drop):
            text = ""
        out.content(text)
        self._hold.clear()
        self._first = True  # nothing more to send

    def finish(self, out: DeltaBuilder) -> bool:
        """Send the rest; returns whether the content is engine content
        (empty means None) rather than the raw legacy fallback."""
        if self._raw is not None and not self._called:
            out.content(self._raw.value())
            return False
        if self._legacy and not self._called and not self.started:
            out.content(self._hold.value())  # no tool event: raw == engine text
            return False
        tail = self._hold.value() + ("" if self._announced else self._post.value())
        if self._first:
            out.content(tail.rstrip() if self._called and self._strip else tail)
        else:
            if not tail.strip() and ((self._called and self._auto) or (self._drop and self._slots)):
                tail = ""
            out.content(tail.strip() if self._called and self._strip else tail)
        return True

    # ── sending ──────────────────────────────────────────────────────

    def _release(self, out: DeltaBuilder) -> None:
        if self._raw is not None and not self._called:
            return  # legacy: raw and engine readings differ, both wait
        if not self._first:
            if not self._hold:
                return
            text = self._hold.value()
            if text.isspace():
                return  # whitespace-only so far: "" if a call follows
            if self._whole and self._strip and text[0].isspace():
                return  # one chunk: nothing is sent before the end, so keep vLLM's strip
            self._first = True  # leading whitespace goes too (docs/parsers.md, "held content")
        text = self._hold.value()
        kept = text.rstrip() if self._strip else text
        if kept:
            out.content(kept)
            self._hold = TextBuffer(text[len(kept) :])


def _holds(held: str | None, inert: frozenset[str]) -> dict[str, Any]:
    return {} if held is None else {"holds": (held,), "inert": (inert,)}
