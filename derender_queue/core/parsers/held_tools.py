"""One stage for vLLM 0.34's legacy tool parsers that decide at the end.

``granite4``, ``internlm``, ``jamba``, ``xlam``, ``olmo3``, ``dots``, ...
(``json_tools.py``, ``olmo3_tools.py``, ``dots.py``) are not grammars of
terminals: each ``extract_tool_calls`` reads the whole output at once (JSON
decoded all or none, regular expressions over the whole text, Python's
``ast``), and vLLM's serving layer returns the raw input as the content
unless it says ``tools_called``.  So this stage holds the text from where a
call may start to the end and runs the parser's ``extract`` function on it
there; what comes before streams when the parser's answer starts with it.

A parser is an ``Extractor``: ``extract(text, tools)`` is vLLM's answer for
``text``, None when no tool was called (the content is then the input, as
it came), else the content and the calls (``[]`` when vLLM says
``tools_called`` without any).  ``markers``: where a call can start; the
text before the first is the start of the content in both answers (verbatim
with ``strip=False``; with ``strip=True`` vLLM strips it, and joins it and
the content after the calls with ``"\\n"``).  Without markers the whole output
is held (the parser reads it as a whole).  With ``strip`` the leading
whitespace goes out with the first text, as the engine's "held content"
(docs/parsers.md), and a non-streaming parse holds everything.

State: the lexer's hold, the blank start, held trailing whitespace (strip),
whether a marker came, the held tail.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .buffer import TextBuffer
from .deltas import DeltaBuilder, ParsedDelta, ToolCallDelta, past_blank
from .ids import make_tool_call_id
from .lexer import LiteralLexer
from .passage import Passage, holding

Tools = list[dict[str, Any]] | None
Calls = list[tuple[str, str]]
# None: tools_called false (the content is the input); else (content, calls).
Answer = tuple[str | None, Calls] | None


@dataclass(frozen=True)
class Extractor:
    extract: Callable[[str, Tools], Answer]
    markers: tuple[str, ...] = ()
    strip: bool = False
    # ToolParser.supports_required_and_named (forced.py); False where the
    # parser sets it so (a forced tool_choice then parses as auto).
    supports_required_and_named: bool = True


HELD_TOOLS: dict[str, Extractor] = {}


def register(name: str, extractor: Extractor) -> Extractor:
    HELD_TOOLS[name] = extractor
    return extractor


class HeldToolStage:
    def __init__(self, extractor: Extractor, tools: Tools, whole: bool, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self._x = extractor
        self._tools = tools
        self._lexer = LiteralLexer(dict.fromkeys(extractor.markers, "MARK")) if extractor.markers else None
        self._hold_all = not extractor.markers or (extractor.strip and whole)
        self._held: str = s.get("held", "")  # a partial marker
        self._blank: str = s.get("blank", "")  # blank content so far
        self._sent: bool = s.get("sent", False)  # content went out
        self._trail: str = s.get("trail", "")  # strip: trailing whitespace not sent yet
        self._marked: bool = s.get("marked", self._hold_all)
        self._tail = TextBuffer(s.get("tail", ""))

    def to_state(self) -> dict[str, Any]:
        return {"held": self._held, "blank": self._blank, "sent": self._sent, "trail": self._trail,
                "marked": self._marked, "tail": self._tail.dump()}  # fmt: skip

    def passage(self) -> Passage | None:
        """Content before any marker, once some went out, when nothing is held
        (passage.py); with ``strip`` the trailing whitespace is held back."""
        if (self._lexer is None or self._marked) and not self._held:
            return holding("tail")  # from the first marker on (or all): until the end
        if self._lexer is None or self._marked or self._held or not self._sent:
            return None
        return Passage("content", self._lexer.first_chars, strips=self._x.strip, lead=self._trail)

    def feed(self, text: str) -> ParsedDelta:
        out = DeltaBuilder()
        if self._lexer is None or self._marked:
            self._tail.append(self._held + text)
            self._held = ""
            return out.build()
        tokens, self._held = self._lexer.scan(self._held, text)
        for name, piece in tokens:
            self._piece(name is not None, piece, out)
        return out.build()

    def finish(self, input_is_none: bool) -> tuple[ParsedDelta, bool]:
        out = DeltaBuilder()
        if self._lexer is not None and not self._marked:
            tokens, self._held = self._lexer.scan(self._held, "", final=True)
            for name, piece in tokens:
                self._piece(name is not None, piece, out)
        tail = self._tail.value() + self._held
        answer = self._x.extract(tail, self._tools) if self._marked else None
        if answer is None:
            out.content(self._blank + self._trail + tail)
            return out.build(), input_is_none
        content, calls = answer
        content = content or ""
        if not self._hold_all:
            content = self._after_prefix(content)
        if self._sent or content.strip():  # vLLM's serving layer: blank content beside calls is None
            out.content(content)
        for index, (name, arguments) in enumerate(calls):
            out.tool_calls.append(ToolCallDelta(index, id=make_tool_call_id(), name=name, arguments=arguments))
        return out.build(), True

    def _after_prefix(self, content: str) -> str:
        """What follows the content already sent (the text before the first
        marker), given the content ``extract`` found in the tail alone."""
        if not self._x.strip:
            return self._blank + content
        return "\n" + content if self._sent and content else content

    def _piece(self, marker: bool, text: str, out: DeltaBuilder) -> None:
        if marker:
            self._marked = True
        if self._marked:
            self._tail.append(text)
            return
        if self._x.strip and self._sent:
            body = text.rstrip()
            if body:
                out.content(self._trail + body)
                self._trail = ""
            self._trail += text[len(body) :]
            return
        if self._x.strip and not (self._blank + text).strip():
            self._blank += text
            return
        if self._x.strip:
            text, self._blank = self._blank + text, ""
            body = text.rstrip()
            self._trail = text[len(body) :]
            out.content(body)
            self._sent = True
            return
        self._blank, self._sent = past_blank(self._blank, self._sent, text, out)
