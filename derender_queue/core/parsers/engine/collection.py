"""Tool bodies that hold several JSON objects, one call each (vLLM 0.34's
``tool_call_body_collection``: Llama's ``{...}; {...}``, Granite's ``[{...}, {...}]``).

A port of ``StreamingParserEngine._feed_json_collection_*``: in ``TOOL_ARGS``
each top-level ``{...}`` (string- and escape-aware, ``[`` and ``]`` counted
with the braces) becomes one call, ``TOOL_CALL_START`` before its first
character and ``TOOL_CALL_END`` after its closing brace; whitespace and the
format's delimiters between objects are dropped, and any other character
ends the body: the machine goes back to ``CONTENT`` and that character and
the rest of the text are content.  vLLM's argument buffering only decides
when argument text is sent, not what it is, so it is left out.

The position is seven small values (``Collection.to_state``).
"""

from __future__ import annotations

from typing import Any

from .grammar import Event

SEMICOLON, JSON_ARRAY = "semicolon_sequence", "json_array"
_WS = " \t\r\n"

# (event, text) pairs; the machine adds the call index.
Out = list[tuple[Event, str]]


class Collection:
    __slots__ = ("depth", "escape", "had_element", "in_element", "in_string", "separator", "started")

    def __init__(self, state: list[Any] | None = None) -> None:
        s = state or [False, False, False, False, 0, False, False]
        self.started, self.in_element, self.had_element, self.separator = s[0], s[1], s[2], s[3]
        self.depth, self.in_string, self.escape = s[4], s[5], s[6]

    def to_state(self) -> list[Any]:
        return [self.started, self.in_element, self.had_element, self.separator, self.depth, self.in_string,
                self.escape]  # fmt: skip

    def feed(self, mode: str, text: str, out: Out) -> int | None:
        """Consume ``text``; returns None while the body goes on, else where
        its content starts (a closing ``]`` is dropped, any other character
        that ends the body is content)."""
        for i, ch in enumerate(text):
            if self.in_element:
                self._arg(ch, out)
                if ch == "}" and not self.in_string and not self.escape and self.depth == 0:
                    self.in_element, self.had_element = False, True
                    out.append((Event.TOOL_CALL_END, ""))
                continue
            if ch in _WS:
                continue
            step = self._delimiter(mode, ch, out)
            if step is not None:
                return i + step
        return None

    def _delimiter(self, mode: str, ch: str, out: Out) -> int | None:
        """vLLM's ``_feed_*_delimiter``: None to go on, 1 when the body ends
        with this character dropped, 0 when it bails to content with it."""
        if mode == JSON_ARRAY:
            if not self.started:
                self.started = ch == "["
                return None if self.started else 0
            if ch == ",":
                return None
            if ch == "{":
                self._start(ch, out)
                return None
            return 1 if ch == "]" else 0
        if ch == ";" and self.had_element and not self.separator:
            self.separator = True
            return None
        if ch == "{" and not (self.had_element and not self.separator):
            self.started, self.separator = True, False
            self._start(ch, out)
            return None
        return 0

    def _start(self, ch: str, out: Out) -> None:
        self.depth, self.in_string, self.escape, self.in_element = 0, False, False, True
        out.append((Event.TOOL_CALL_START, ""))
        self._arg(ch, out)

    def _arg(self, ch: str, out: Out) -> None:
        if out and out[-1][0] is Event.ARG:
            out[-1] = (Event.ARG, out[-1][1] + ch)
        else:
            out.append((Event.ARG, ch))
        if self.escape:
            self.escape = False
        elif self.in_string:
            if ch == "\\":
                self.escape = True
            elif ch == '"':
                self.in_string = False
        elif ch == '"':
            self.in_string = True
        elif ch in "{[":
            self.depth += 1
        elif ch in "}]" and self.depth > 0:
            self.depth -= 1
