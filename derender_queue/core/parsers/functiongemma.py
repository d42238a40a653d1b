"""``functiongemma`` tool calls: vLLM 0.34's ``FunctionGemmaToolParser.extract_tool_calls``.

FunctionGemma (google/functiongemma-270m-it) writes its calls after its content::

    Let me check.<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>

Not an engine family: vLLM's legacy parser reads the whole output with one
regular expression, ``<start_function_call>call:(\\w+)\\{(.*?)\\}<end_function_call>``
or else ``<start_function_call>call:(\\w+)\\{(.*)`` to the end of the text
(a lazy body may run across later calls), and decides at the end: with calls
the content is the text before the first ``<start_function_call>``, stripped
(None if blank); without, the output as it came.  So from the first marker on
the text is held to the end; before it, content streams (both outcomes keep
it) but its trailing whitespace, held until text follows, and a blank start,
held until text shows (sent then: the documented "held content" exception).

Arguments: ``key:value`` pairs, strings between ``<escape>`` markers and read
as JSON where they parse (``<escape>42<escape>`` is 42), bare values
``true``/``false``/``null``/``None`` or JSON or their text, nested ``{...}``
objects (bare keys) and ``[...]`` arrays; parsing stops at the first
unfinished or malformed value, keeping the pairs before it.  vLLM's regex
module reads ``\\w`` a little wider than ``re`` (join controls, a few marks); a
name with such a character is no call here.  vLLM builds the parser
without a structural tag, so a forced ``tool_choice`` is its standard one
(``forced.py``).  State: the lexer's hold, the unsent whitespace, the tail.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .buffer import TextBuffer
from .deltas import ParsedDelta, ToolCallDelta
from .ids import make_tool_call_id
from .lexer import LiteralLexer
from .passage import Passage

NAME = "functiongemma"
START = "<start_function_call>"
ESCAPE = "<escape>"

_LEXER = LiteralLexer({START: "MARK"})
_CALL_RE = re.compile(r"<start_function_call>call:(\w+)\{(.*?)\}<end_function_call>"
                      r"|<start_function_call>call:(\w+)\{(.*)", re.DOTALL)
_LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None, "None": None}


class _Stop(Exception):
    """A value the text leaves unfinished, or a delimiter where a value or key starts."""


def _json_or_text(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \n":
        pos += 1
    return pos


def _value(text: str, pos: int) -> tuple[Any, int]:
    pos = _skip(text, pos)
    if text.startswith(ESCAPE, pos):
        end = text.find(ESCAPE, pos + len(ESCAPE))
        if end < 0:
            raise _Stop
        return _json_or_text(text[pos + len(ESCAPE) : end]), end + len(ESCAPE)
    if text.startswith("{", pos) or text.startswith("[", pos):
        return _container(text, pos)
    end = pos
    while end < len(text) and text[end] not in ",}]":
        end += 1
    if end == pos:
        raise _Stop
    raw = text[pos:end].strip()
    return (_LITERALS[raw] if raw in _LITERALS else _json_or_text(raw)), end


def _container(text: str, pos: int) -> tuple[Any, int]:
    """The ``{`` object (bare keys) or ``[`` array at ``pos``."""
    is_object = text[pos] == "{"
    closer, wrong = ("}", "]") if is_object else ("]", "}")
    obj: dict[str, Any] = {}
    items: list[Any] = []
    pos += 1
    while True:
        pos = _skip(text, pos)
        if pos >= len(text) or text[pos] == wrong:
            raise _Stop
        if text[pos] == closer:
            return (obj if is_object else items), pos + 1
        if text[pos] == ",":
            pos += 1
            continue
        if not is_object:
            item, pos = _value(text, pos)
            items.append(item)
            continue
        colon = text.find(":", pos)
        if colon < 0:
            raise _Stop
        key = text[pos:colon].strip()
        obj[key], pos = _value(text, colon + 1)


def functiongemma_arguments(body: str) -> dict[str, Any]:
    """``FunctionGemmaToolParser._parse_arguments(body)``."""
    out: dict[str, Any] = {}
    pos = 0
    while pos < len(body):
        if body[pos] in ", \n":
            pos += 1
            continue
        colon = body.find(":", pos)
        key = body[pos:colon].strip() if colon >= 0 else ""
        if not key:
            break
        try:
            value, pos = _value(body, colon + 1)
        except _Stop:
            break
        out[key] = value
    return out


def functiongemma_calls(text: str) -> list[tuple[str, str]] | None:
    """The (name, arguments) vLLM finds in ``text``; None for none."""
    calls = []
    try:
        for m in _CALL_RE.finditer(text):
            name = m.group(1) or m.group(3)
            body = m.group(2) if m.group(2) else (m.group(4) or "")
            calls.append((name, json.dumps(functiongemma_arguments(body), ensure_ascii=False)))
    except RecursionError:  # vLLM: any exception makes the output the content
        return None
    return calls or None


class FunctionGemmaToolStage:
    def __init__(self, *, whole: bool = False, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self._whole = whole  # one feed: the content before the marker waits for the end
        self._held: str = s.get("held", "")  # a partial marker
        self._lead: str = s.get("lead", "")  # unsent content before any was sent
        self._trail: str = s.get("trail", "")  # whitespace after the sent content
        self._sent: bool = s.get("sent", False)
        self._tail = TextBuffer(s.get("tail", ""))  # from the first marker on
        self._marked: bool = s.get("marked", False)

    def to_state(self) -> dict[str, Any]:
        return {"held": self._held, "lead": self._lead, "trail": self._trail, "sent": self._sent,
                "tail": self._tail.dump(), "marked": self._marked}  # fmt: skip

    def passage(self) -> Passage | None:
        """Content before any marker, once some went out, when no partial
        marker is held: sent less its trailing whitespace (passage.py)."""
        if self._marked or self._held or not self._sent or self._whole:
            return None
        return Passage("content", strips=True, lead=self._trail, lexers=(_LEXER,))

    def feed(self, text: str) -> ParsedDelta:
        return self._scan(text, final=False)

    def _scan(self, text: str, *, final: bool) -> ParsedDelta:
        out = ParsedDelta()
        tokens, self._held = _LEXER.scan(self._held, text, final=final)
        for name, piece in tokens:
            self._piece(name is not None, piece, out)
        return out

    def finish(self, input_is_none: bool) -> tuple[ParsedDelta, bool]:
        out = self._scan("", final=True)
        # The text before the tail holds no marker, so vLLM's matches are the tail's.
        tail = self._tail.value()
        calls = functiongemma_calls(tail) if self._marked else None
        if calls is None:
            out.content = ((out.content or "") + self._lead + self._trail + tail) or None
            return out, input_is_none
        if not self._sent and self._lead.strip():
            out.content = (out.content or "") + self._lead.strip()
        for i, (name, arguments) in enumerate(calls):
            out.tool_calls.append(ToolCallDelta(i, id=make_tool_call_id(), name=name, arguments=arguments))
        return out, True

    def _piece(self, marker: bool, text: str, out: ParsedDelta) -> None:
        """Content before the first marker streams (a blank start and trailing
        whitespace held); from the marker on, the tail is held."""
        self._marked = self._marked or marker
        if self._marked:
            self._tail.append(text)
            return
        if self._sent:
            text, self._trail = self._trail + text, ""
        else:
            self._lead += text
            if self._whole or not self._lead.strip():
                return
            text, self._lead, self._sent = self._lead, "", True
        kept = text.rstrip()
        self._trail = text[len(kept) :]
        if kept:
            out.content = (out.content or "") + kept
