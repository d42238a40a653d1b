"""MiniCPM-V's newline recovery (vLLM 0.34 ``MiniCPMVUnifiedParser``), a
wrapper around the whole chat parser of any pair that names ``minicpmv``.

MiniCPM-V's tokenizer decodes some newlines as the two characters ``\\`` and
``n``.  vLLM rewrites the final reasoning and content (not the tool calls'
arguments): ``\\n``, ``\\r`` and ``\\r\\n`` become a newline, except inside
code (`` ` ``, `` ``` ``), LaTeX (``$``, ``$$``, ``\\(...\\)``, ``\\[...\\]``)
and runs of backslashes, which stay as written.  A text without a backslash
is unchanged.  Here each field runs through one ``Recovery`` as it streams:
a half-written escape or marker at a chunk's end waits for the next chunk,
so any chunking gives the non-streaming answer.  State: per field, the open
span's closing marker and the held characters (a few).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .deltas import ParsedDelta
from .passage import Passage
from .pipeline import ChatParser

NAME = "minicpmv"
_SPANS = (("```", "```"), ("`", "`"), ("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_UNSURE_ESCAPES = ("\\", "\\r", "\\r\\")  # may still become \n, \r\n or more
# Every escape, span opener and closer starts with one of these: text without
# them passes a Recovery unchanged (when it holds nothing).
_STOPS = frozenset("\\`$")


class Recovery:
    def __init__(self, state: Sequence[str] | None = None) -> None:
        self.closing, self.held = state or ("", "")

    def to_state(self) -> list[str]:
        return [self.closing, self.held]

    def feed(self, text: str, final: bool = False) -> str:
        text, self.held = self.held + text, ""
        out: list[str] = []
        i = 0
        while i < len(text):
            rest = text[i:]
            if self.closing:
                if rest.startswith(self.closing):
                    out.append(self.closing)
                    i += len(self.closing)
                    self.closing = ""
                elif not final and self.closing.startswith(rest):
                    self.held = rest
                    break
                else:
                    out.append(text[i])
                    i += 1
                continue
            ch = text[i]
            if ch in "`$":
                if not final and rest in (ch, ch * 2) and not (ch == "$" and rest == "$$"):
                    self.held = rest  # a longer opener may follow
                    break
            elif ch != "\\":
                out.append(ch)
                i += 1
                continue
            else:
                run = len(rest) - len(rest.lstrip("\\"))
                if run > 1:
                    if not final and run == len(rest):
                        self.held = rest  # the run's length decides what follows
                        break
                    out.append(rest[:run])
                    i += run
                    continue
                if not final and rest in _UNSURE_ESCAPES:
                    self.held = rest
                    break
                newline = next((e for e in ("\\r\\n", "\\n", "\\r") if rest.startswith(e)), None)
                if newline:
                    out.append("\n")
                    i += len(newline)
                    continue
            opener = next(((o, c) for o, c in _SPANS if rest.startswith(o)), None)
            if opener is None:
                out.append("\\")
                i += 1
                continue
            out.append(opener[0])
            i += len(opener[0])
            self.closing = opener[1]
        if final:
            out.append(self.held)
            self.held = ""
        return "".join(out)


class NewlineRecovery:
    """A ``ChatParser`` whose reasoning and content go through ``Recovery``."""

    def __init__(self, inner: ChatParser, state: dict[str, Any] | None = None) -> None:
        self._inner = inner
        r, c = (state or {}).get("nl") or (None, None)
        self._reasoning, self._content = Recovery(r), Recovery(c)

    def to_state(self) -> dict[str, Any]:
        return {**self._inner.to_state(), "nl": [self._reasoning.to_state(), self._content.to_state()]}

    def feed(self, delta_text: str, delta_token_ids: Sequence[int] = ()) -> ParsedDelta:
        return self._recover(self._inner.feed(delta_text, delta_token_ids), final=False)

    def finish(self) -> ParsedDelta:
        return self._recover(self._inner.finish(), final=True)

    def passage(self) -> Passage | None:
        inner = self._inner.passage()
        if inner is None or inner.field == "":
            return inner
        recovery = self._reasoning if inner.field == "reasoning" else self._content
        return None if recovery.held else inner._replace(stops=inner.stops | _STOPS)

    def _recover(self, delta: ParsedDelta, final: bool) -> ParsedDelta:
        delta.reasoning = _field(self._reasoning, delta.reasoning, final)
        delta.content = _field(self._content, delta.content, final)
        return delta


def _field(recovery: Recovery, text: str | None, final: bool) -> str | None:
    if text is None and not (final and recovery.held):
        return None
    out = recovery.feed(text or "", final)
    return out if out or text == "" else None
