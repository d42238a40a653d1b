"""gpt-oss harmony: reasoning ``openai_gptoss``, tools ``openai`` (vLLM 0.34
``parser/harmony.py``).  ::

    <|channel|>analysis<|message|>Let me think.<|end|>
    <|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>
    {"city": "Paris"}<|call|>
    <|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>

A stage of its own beside the engine, for both passes at once: a harmony
output is a sequence of messages whose header (channel, recipient, content
type) decides what the whole message is, which vLLM's terminal grammars do
not express, and vLLM does not run its two-pass ``DelegatingParser`` here
(``HarmonyParser`` replaces it whenever the model is gpt-oss, whatever the
parser names).

Built from vLLM's source and openai_harmony 0.0.8's ``StreamableParser``
(``encoding.rs``), not checked against a recording: vLLM's parser needs the
``openai_harmony`` package and its o200k vocabulary, a download, and neither
is in the reference environment.  ``tests/core/test_parser_harmony.py`` holds the
cases from vLLM's ``tests/parser/test_harmony.py``.

vLLM's non-streaming ``parse`` feeds every output token id to the
``StreamableParser`` (strict, the first message's role known to be the
assistant's) and skips the tokens it refuses:

* between messages everything but ``<|start|>`` is refused (dropped);
* a header runs to ``<|message|>`` (stop tokens in it are header text); a
  header it cannot parse (``harmony_header.py``) loses its message: the
  tokens up to the next ``<|start|>`` are refused;
* a message's text runs to ``<|end|>``, ``<|call|>`` or ``<|return|>`` or
  the end of the output; other special tokens are text;
* at the end, inside a header, vLLM recovers: the text of the tokens since
  the last complete message (those not refused) becomes a ``final``
  message; so a plain output without markup is content.

Each complete assistant message then counts: a function recipient makes a
call (JSON arguments re-serialized by ``json.dumps``, else kept as text),
``analysis`` is reasoning, ``final`` (or ``commentary`` without recipient)
is content; reasoning and content parts are joined with ``"\\n"``.  A call
needs the ``openai`` tool parser, reasoning the ``openai_gptoss`` one.

Here the text is read instead of the ids (markers by their spelling, as the
engine families read theirs): a marker spelled with ordinary tokens is a
marker here and text to vLLM.  Reasoning and content stream as they come; a
call's header goes out when its message header ends, its arguments when the
message does.  State: the phase, the lexer's hold, the open header and the
text recovery would return (an output without ``<|message|>`` holds all of
it: vLLM decides it at the end), the open call's text, a few counters.
"""

from __future__ import annotations

import json
from typing import Any

from .deltas import ParsedDelta, ToolCallDelta
from .harmony_header import Kind, message_kind, parse_header
from .ids import make_tool_call_id
from .lexer import LiteralLexer

REASONING_NAME = "openai_gptoss"
TOOL_NAME = "openai"

_LEXER = LiteralLexer({
    "<|start|>": "START", "<|message|>": "MESSAGE",
    "<|end|>": "STOP", "<|call|>": "STOP", "<|return|>": "STOP",
})  # fmt: skip

_EXPECT, _HEADER, _BODY = "expect", "header", "body"


def call_arguments(text: str, content_type: str | None) -> str:
    """``HarmonyParser.parse``'s arguments: JSON re-serialized, else the text."""
    if content_type is not None and "json" not in content_type:
        return text
    try:
        return json.dumps(json.loads(text))
    except (json.JSONDecodeError, RecursionError):  # vLLM: a RecursionError is a 500
        return text


class HarmonyStage:
    """One choice's harmony parse; ``reasoning``/``tools``: which of the two
    parser names the server configured (``tools`` only with auto tools)."""

    def __init__(self, *, reasoning: bool, tools: bool, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self._reasoning_on, self._tools_on = reasoning, tools
        self._phase: str = s.get("ph", _HEADER)  # the first header has no <|start|>
        self._role_known: bool = s.get("rk", True)
        self._held: str = s.get("held", "")
        self._header: str = s.get("hd", "")
        self._recovery: str = s.get("rc", "")  # refused-free text before the open header
        self._kind = Kind(s["k"]) if s.get("k") else Kind.IGNORE
        self._started: bool = s.get("st", False)  # the open message gave text
        self._args: str = s.get("a", "")
        self._ctype: str | None = s.get("ct")
        self._calls: int = s.get("n", 0)
        self._seen: list[bool] = list(s.get("seen", (False, False)))  # a reasoning / content part

    def to_state(self) -> dict[str, Any]:
        return {
            "ph": self._phase, "rk": self._role_known, "held": self._held, "hd": self._header,
            "rc": self._recovery, "k": self._kind.value, "st": self._started, "a": self._args,
            "ct": self._ctype, "n": self._calls, "seen": self._seen,
        }  # fmt: skip

    def feed(self, text: str) -> ParsedDelta:
        out = ParsedDelta()
        tokens, self._held = _LEXER.scan(self._held, text)
        for name, piece in tokens:
            self._token(name, piece, out)
        return out

    def finish(self) -> ParsedDelta:
        out = ParsedDelta()
        tokens, self._held = _LEXER.scan(self._held, "", final=True)
        for name, piece in tokens:
            self._token(name, piece, out)
        if self._phase == _BODY:
            self._complete(out)
        elif self._phase == _HEADER:
            # process_eos raises inside a header: vLLM returns the raw text.
            text, self._recovery, self._header = self._recovery + self._header, "", ""
            self._part(Kind.CONTENT, text, out)
        self._phase = _EXPECT
        return out

    def _token(self, name: str | None, text: str, out: ParsedDelta) -> None:
        if self._phase == _EXPECT:
            if name == "START":
                self._phase = _HEADER
                self._recovery += text
        elif self._phase == _HEADER:
            if name == "MESSAGE":
                self._open(out)
            else:
                self._header += text
        elif name == "STOP":
            self._complete(out)
        elif self._kind is Kind.TOOL:
            self._args += text
        elif text:
            self._part(self._kind, text, out, first=not self._started)
            self._started = True

    def _open(self, out: ParsedDelta) -> None:
        header = parse_header(self._header, role_known=self._role_known)
        if header is None:  # the message is lost; its header stays recoverable
            self._recovery += self._header
            self._header, self._phase = "", _EXPECT
            return
        self._role_known = False
        self._header = self._recovery = ""
        self._phase, self._started = _BODY, False
        kind, name = message_kind(header)
        if (kind is Kind.TOOL and not self._tools_on) or (kind is Kind.REASONING and not self._reasoning_on):
            kind = Kind.IGNORE
        self._kind = kind
        if kind is Kind.TOOL:
            self._args, self._ctype = "", header.content_type
            out.tool_calls.append(ToolCallDelta(self._calls, id=make_tool_call_id(), name=name))
            self._calls += 1

    def _complete(self, out: ParsedDelta) -> None:
        if self._kind is Kind.TOOL:
            out.tool_calls.append(ToolCallDelta(self._calls - 1, arguments=call_arguments(self._args, self._ctype)))
            self._args, self._ctype = "", None
        self._phase, self._kind, self._recovery = _EXPECT, Kind.IGNORE, ""

    def _part(self, kind: Kind, text: str, out: ParsedDelta, *, first: bool = True) -> None:
        """Text of a reasoning or content part; a later part starts with "\\n"."""
        if not text or kind not in (Kind.REASONING, Kind.CONTENT):
            return
        slot = 0 if kind is Kind.REASONING else 1
        if first and self._seen[slot]:
            text = "\n" + text
        self._seen[slot] = True
        if kind is Kind.REASONING:
            out.reasoning = (out.reasoning or "") + text
        else:
            out.content = (out.content or "") + text
