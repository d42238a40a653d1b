"""``gigachat3`` tool calls: vLLM 0.34's ``GigaChat3ToolParser.extract_tool_calls``.

GigaChat 3 writes at most one call after its content::

    Let me check.<|message_sep|>function call<|role_sep|>
    {"name": "get_weather", "arguments": {"city": "Paris"}}

vLLM (a trailing ``</s>`` cut off first) reads everything after the first
``function call<|role_sep|>\\n`` or ``<|function_call|>`` as one JSON value
(``strict=False``); a dict with a ``name`` and a dict ``arguments`` is the
call, and the content is then the text before the first ``<|message_sep|>``
or ``<|function_call|>`` (None if blank).  Anything else is no call, and the
content is the text as it came, markup and all.

Whether the tail is such a JSON value is known only at the end, so from the
first of those three markers on the text is held; before it, content
streams (both outcomes keep it), a whitespace-only start held until text
shows (a call would make it None).  One difference: a call whose ``name`` is
not a string makes vLLM's ``FunctionCall`` raise (a server error); here it
is no call.  State: the lexer's hold, the blank start, the held tail.
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

NAME = "gigachat3"
ROLE_SEP_CALL = "function call<|role_sep|>\n"
FUNCTION_CALL = "<|function_call|>"
MESSAGE_SEP = "<|message_sep|>"

_LEXER = LiteralLexer({ROLE_SEP_CALL: "MARK", FUNCTION_CALL: "MARK", MESSAGE_SEP: "MARK"})
# vLLM's patterns (the `regex` module; no \s in them, so `re` reads them alike).
_FUNCTION_CALL_RE = re.compile(r"(?:function call<\|role_sep\|>\n|<\|function_call\|>)(.*)", re.DOTALL)
_CONTENT_RE = re.compile(r"^(.*?)(?:<\|message_sep\|>|<\|function_call\|>)", re.DOTALL)


def gigachat3_call(text: str) -> tuple[str, str, str] | None:
    """(content, name, arguments) when vLLM finds a call in ``text``, else None."""
    if text.rstrip().endswith("</s>"):
        text = text[: text.rfind("</s>")]
    found = _FUNCTION_CALL_RE.search(text)
    if found is None:
        return None
    try:
        call = json.loads(found.group(1), strict=False)
    except (ValueError, RecursionError):
        return None
    if not isinstance(call, dict) or "name" not in call or not isinstance(call.get("arguments"), dict):
        return None
    if not isinstance(call["name"], str):
        return None  # vLLM: FunctionCall(name=...) raises
    content = _CONTENT_RE.search(text)
    return (content.group(1) if content else text), call["name"], json.dumps(call["arguments"], ensure_ascii=False)


class GigaChat3ToolStage:
    def __init__(self, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self._held: str = s.get("held", "")  # a partial marker
        self._blank: str = s.get("blank", "")  # whitespace-only content so far
        self._sent: bool = s.get("sent", False)  # content went out
        self._tail = TextBuffer(s.get("tail", ""))  # from the first marker on
        self._marked: bool = s.get("marked", False)

    def to_state(self) -> dict[str, Any]:
        return {"held": self._held, "blank": self._blank, "sent": self._sent, "tail": self._tail.dump(),
                "marked": self._marked}  # fmt: skip

    def passage(self) -> Passage | None:
        """Content before any marker, once some went out, when nothing is held (passage.py)."""
        if self._marked or self._held or not self._sent or self._blank:
            return None
        return Passage("content", lexers=(_LEXER,))

    def feed(self, text: str) -> ParsedDelta:
        out = ParsedDelta()
        tokens, self._held = _LEXER.scan(self._held, text)
        for name, piece in tokens:
            self._piece(name is not None, piece, out)
        return out

    def finish(self, input_is_none: bool) -> tuple[ParsedDelta, bool]:
        out = ParsedDelta()
        tokens, self._held = _LEXER.scan(self._held, "", final=True)
        for name, piece in tokens:
            self._piece(name is not None, piece, out)
        # The text before the tail holds no marker and the tail starts with
        # one, so vLLM's reading of the whole text is its reading of the tail
        # (the "</s>" cut included) behind the content already decided.
        tail = self._tail.value()
        call = gigachat3_call(tail) if self._marked else None
        if call is None:
            out.content = ((out.content or "") + self._blank + tail) or None
            return out, input_is_none
        content, name, arguments = call
        rest = self._blank + content
        if self._sent or rest.strip():
            out.content = (out.content or "") + rest
        out.tool_calls.append(ToolCallDelta(0, id=make_tool_call_id(), name=name, arguments=arguments))
        return out, True

    def _piece(self, marker: bool, text: str, out: ParsedDelta) -> None:
        if marker:
            self._marked = True
        if self._marked:
            self._tail.append(text)
            return
        if not self._sent and not (self._blank + text).strip():
            self._blank += text
            return
        text, self._blank = self._blank + text, ""
        self._sent = True
        out.content = (out.content or "") + text
