"""``kimi_k3`` reasoning and tools: vLLM 0.34's legacy ``KimiK3ReasoningParser``
and ``KimiK3ToolParser`` (composed by ``parser/kimi_k3.py``), as stages.

Kimi K3 writes XTML channels out of ``<|open|>``, ``<|close|>`` and
``<|sep|>`` tokens::

    <|open|>think<|sep|>plan<|close|>think<|sep|>
    <|open|>response<|sep|>Let me check.<|close|>response<|sep|>
    <|open|>tools<|sep|><|open|>call tool="search" index="1"<|sep|>
    <|open|>argument key="query" type="string"<|sep|>q<|close|>argument<|sep|>
    <|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>

Not an engine family, because vLLM decides every field by searching the
whole text (``extract_reasoning``, ``extract_tool_calls``), and a later
marker may change what came before:

* reasoning starts after the FIRST ``<|open|>think<|sep|>`` anywhere (text
  before it is dropped), else at 0, and ends at the first think close after
  that; without a close it is the whole rest, and the content is None; with
  neither marker but a ``<|open|>response<|sep|>`` there is no reasoning;
* the content is the body of the first complete response block anywhere in
  the text, even after the tools channel; else the text before the first
  ``<|open|>tools<|sep|>``, unwrapped (after a response open, up to its close;
  stray response closes and every ``<|close|>message<|sep|>`` removed);
* calls are the complete ``call`` blocks in the first tools channel; a string
  argument is its raw text, any other type JSON (raw when it does not parse),
  attribute values unescaped; a call without ``tool=`` is dropped.

So each stage streams only what the text has decided and holds the rest
(the reasoning once its open came, a response body up to its first ``<|``:
``KimiK3ReasoningStage``, ``KimiK3ToolStage``), answering as vLLM's
non-streaming parse does.  Without a tool parser (or with ``tool_choice: none``) the reasoning
parser unwraps the response channel itself, unless the request has tools and
a tool choice other than ``none`` (then the XTML stays in the content).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .buffer import TextBuffer
from .deltas import DeltaBuilder, ParsedDelta, ToolCallDelta
from .ids import make_tool_call_id
from .lexer import LiteralLexer, partial_marker_len
from .passage import Passage
from .request import ParseRequest

KIMI_K3 = "kimi_k3"

# vLLM's patterns (regex module); its \s lacks U+001C..U+001F, stdlib's has them.
_WS = r"[^\S\x1c-\x1f]"
_O, _C, _S = r"<\|open\|>", r"<\|close\|>", r"<\|sep\|>"


def _marker(kind: str, name: str) -> re.Pattern[str]:
    return re.compile(f"{kind}{_WS}*{name}{_WS}*{_S}")


THINK_OPEN, THINK_CLOSE = _marker(_O, "think"), _marker(_C, "think")
RESPONSE_OPEN, RESPONSE_CLOSE = _marker(_O, "response"), _marker(_C, "response")
MESSAGE_CLOSE = _marker(_C, "message")
TOOLS_OPEN, TOOLS_CLOSE = _marker(_O, "tools"), _marker(_C, "tools")
_UNTIL_SEP = r"(?:(?!" + _S + r").)*?"
CALL = re.compile(f"{_O}{_WS}*call{_WS}+(?P<attrs>{_UNTIL_SEP}){_S}(?P<body>.*?){_C}{_WS}*call{_WS}*{_S}", re.DOTALL)
ARGUMENT = re.compile(
    f"{_O}{_WS}*argument{_WS}+(?P<attrs>{_UNTIL_SEP}){_S}(?P<val>.*?){_C}{_WS}*argument{_WS}*{_S}", re.DOTALL
)
ATTR = re.compile(r'(?P<k>\w+)="(?P<v>[^"]*)"')
RESPONSE = re.compile(f"{_O}{_WS}*response{_WS}*{_S}(?P<c>.*?){_C}{_WS}*response{_WS}*{_S}", re.DOTALL)


def thinking_on(chat_template_kwargs: Mapping[str, Any]) -> bool:
    """``KimiK3ReasoningParser.__init__``: ``thinking``, else ``enable_thinking``, default on."""
    thinking = chat_template_kwargs.get("thinking")
    if thinking is None:
        thinking = chat_template_kwargs.get("enable_thinking", True)
    return bool(thinking)


def strip_wrapper(text: str) -> str:
    """``KimiK3ReasoningParser._strip_content_wrapper``."""
    m_open = RESPONSE_OPEN.search(text)
    m_close = RESPONSE_CLOSE.search(text, m_open.end() if m_open else 0)
    if m_open is not None and m_close is not None:
        text = text[m_open.end() : m_close.start()]
    elif m_open is not None:
        text = text[m_open.end() :]
    else:
        text = RESPONSE_CLOSE.sub("", RESPONSE_OPEN.sub("", text))
    return MESSAGE_CLOSE.sub("", text)


def preserves_tool_channels(request: ParseRequest) -> bool:
    return bool(request.tools) and request.tool_choice != "none"


def split_reasoning(text: str, thinking: bool, preserve: bool) -> tuple[str | None, str | None]:
    """``KimiK3ReasoningParser.extract_reasoning``."""

    def content(rest: str) -> str | None:
        return (rest if preserve else strip_wrapper(rest)) or None

    if not thinking:
        return None, content(text)
    m_open = THINK_OPEN.search(text)
    start = m_open.end() if m_open is not None else 0
    m_close = THINK_CLOSE.search(text, start)
    if m_open is None and m_close is None and RESPONSE_OPEN.search(text) is not None:
        return None, content(text)
    if m_close is not None:
        return text[start : m_close.start()] or None, content(text[m_close.end() :])
    return text[start:] or None, None


def _attrs(text: str) -> dict[str, str]:
    return {m["k"]: m["v"].replace("&quot;", '"').replace("&amp;", "&") for m in ATTR.finditer(text)}


def decode_call(attrs: str, body: str) -> tuple[str, str] | None:
    """``KimiK3ToolParser._decode_call``: (name, arguments JSON) or None."""
    name = _attrs(attrs).get("tool", "")
    arguments: dict[str, Any] = {}
    for m in ARGUMENT.finditer(body):
        arg = _attrs(m["attrs"])
        key, raw = arg.get("key", ""), m["val"]
        if arg.get("type", "string") == "string":
            arguments[key] = raw
            continue
        try:
            arguments[key] = json.loads(raw)
        except json.JSONDecodeError:
            arguments[key] = raw
    return (name, json.dumps(arguments, ensure_ascii=False)) if name else None


def _strip_response(text: str) -> str | None:
    """``KimiK3ToolParser._strip_response_content``."""
    m_open = RESPONSE_OPEN.search(text)
    if m_open is not None:
        m_close = RESPONSE_CLOSE.search(text, m_open.end())
        text = text[m_open.end() : m_close.start()] if m_close is not None else text[m_open.end() :]
    else:
        text = RESPONSE_CLOSE.sub("", text)
    return MESSAGE_CLOSE.sub("", text) or None


def extract_calls(text: str) -> tuple[list[tuple[str, str]], str | None]:
    """``KimiK3ToolParser.extract_tool_calls``: the calls and the content."""
    m_open = TOOLS_OPEN.search(text)
    before = text if m_open is None else text[: m_open.start()]
    calls: list[tuple[str, str]] = []
    if m_open is not None:
        m_close = TOOLS_CLOSE.search(text, m_open.end())
        section = text[m_open.end() : m_close.start() if m_close is not None else len(text)]
        calls = [c for m in CALL.finditer(section) if (c := decode_call(m["attrs"], m["body"])) is not None]
    m = RESPONSE.search(text)
    return calls, (m["c"] or None) if m is not None else _strip_response(before)


_PRE, _THINK, _REST = "pre", "think", "rest"
_OPEN_TAG, _CLOSE_TAG = "<|open|>", "<|close|>"
_LEADING_WS = re.compile(f"{_WS}*")
# passage.py: a text these read as one plain run (no literal, no partial one at
# its end) holds no think close (each starts "<|close|>") and no body stop "<|".
_CLOSE_LEXER = LiteralLexer({_CLOSE_TAG: "close"})
_BODY_LEXER = LiteralLexer({"<|": "stop"})


def _may_close_think(text: str) -> bool:
    """Whether ``text`` (from a ``<|close|>`` on) may still grow into THINK_CLOSE."""
    rest = text[len(_CLOSE_TAG) :]
    rest = rest[_LEADING_WS.match(rest).end() :]  # type: ignore[union-attr]
    if "think".startswith(rest):
        return True
    if not rest.startswith("think"):
        return False
    rest = rest[5:]
    return "<|sep|>".startswith(rest[_LEADING_WS.match(rest).end() :])  # type: ignore[union-attr]


class KimiK3ReasoningStage:
    """``extract_reasoning`` as it comes where the text decides it: once the
    first ``<|open|>think<|sep|>`` is there, the text before it is dropped and
    the reasoning runs from it to the first think close after it (or to the
    end), so it streams, less a partial close; before that open nothing is
    decided (a think close without an open, a response open without either,
    or no marker at all each split the text differently), so the text is held.
    The text after the think close is content: as it came for the tool stage
    when tool channels are kept (``preserves_tool_channels``), else held and
    unwrapped at the end.  State: the phase, the held text (before the open:
    all of it; in the reasoning: a partial close; after it: the unsent
    content) and where an open may still start."""

    reasoning_nullable = True
    content_nullable = True

    def __init__(self, request: ParseRequest, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self._thinking = thinking_on(request.chat_template_kwargs)
        self._preserve = preserves_tool_channels(request)
        self._phase: str = s.get("phase", _PRE)
        self._text = TextBuffer(s.get("text", ""))
        self._scan: int = s.get("scan", 0)  # _PRE: no THINK_OPEN starts before this

    def to_state(self) -> dict[str, Any]:
        return {"phase": self._phase, "text": self._text.dump(), "scan": self._scan}

    def passage(self) -> Passage | None:
        """In the reasoning with nothing held: text without a ``<|close|>``
        or a partial one at its end is reasoning (``_think`` then holds
        nothing); after it, with the tool channels kept, any text is content
        as it came; else the text is held (passage.py)."""
        if self._phase == _THINK:
            return None if self._text.value() else Passage("reasoning", lexers=(_CLOSE_LEXER,))
        if self._phase == _REST and self._preserve:
            return Passage("content")
        return None

    def feed(self, text: str) -> tuple[str, str]:
        if self._phase == _THINK:
            return self._think(self._text.value() + text)
        if self._phase == _REST:
            if self._preserve:
                return "", text
            self._text.append(text)
            return "", ""
        self._text.append(text)
        if not self._thinking:
            return "", ""
        held = self._text.value()
        m = THINK_OPEN.search(held, self._scan)
        if m is None:
            # Only the last <|open|> (or a partial one at the end) may still start an open.
            last = held.rfind(_OPEN_TAG, self._scan)
            self._scan = max(0, min(last if last >= 0 else len(held), len(held) - len(_OPEN_TAG) + 1))
            return "", ""
        self._phase, self._scan = _THINK, 0
        return self._think(held[m.end() :])

    def _think(self, text: str) -> tuple[str, str]:
        m = THINK_CLOSE.search(text)
        if m is not None:
            self._phase = _REST
            self._text = TextBuffer()
            reasoning, (_, content) = text[: m.start()], self.feed(text[m.end() :])
            return reasoning, content
        last = text.rfind(_CLOSE_TAG)
        keep = len(text) - last if last >= 0 and _may_close_think(text[last:]) else partial_marker_len(text, _CLOSE_TAG)
        self._text = TextBuffer(text[len(text) - keep :])
        return text[: len(text) - keep], ""

    def finish(self) -> tuple[str, str]:
        held = self._text.value()
        self._text.clear()
        if self._phase == _THINK:
            return held, ""  # no think close: the rest is reasoning, the content None
        if self._phase == _REST:
            return "", "" if self._preserve else strip_wrapper(held)
        reasoning, content = split_reasoning(held, self._thinking, self._preserve)
        return reasoning or "", content or ""


class KimiK3ToolStage:
    """``KimiK3Parser._extract_tool_calls`` over the held content, but for the
    body of a response channel that opens before any other XTML marker: the
    content is then the first complete response block's body or, without a
    close, the text after that open up to the tools (its message closes
    removed), and both begin with the body's text up to its first ``<|``, so
    that streams (once it is not blank: beside calls a blank content is
    None); from that ``<|`` on the text is held.  State: the held text, the
    response open, whether some body went out."""

    def __init__(self, none: bool, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self._none = none  # tool_choice "none": the content only
        self._text = TextBuffer(s.get("text", ""))  # held (in a body: its blank start or a partial "<|")
        self._open: str = s.get("open", "")  # the response open, once it came (the text before it dropped)
        self._sent: bool = s.get("sent", False)  # some of the body went out (not blank, no "<|" in it)
        self._body: bool = s.get("body", False)  # streaming the response body

    def to_state(self) -> dict[str, Any]:
        return {"text": self._text.dump(), "open": self._open, "sent": self._sent, "body": self._body}

    def passage(self) -> Passage | None:
        """In a response body some of which went out, with nothing held:
        text without ``<|`` or a ``<`` at its end is content, sent whole
        (passage.py)."""
        if self._body and self._sent and not self._text.value():
            return Passage("content", lexers=(_BODY_LEXER,))
        return None

    def feed(self, text: str) -> ParsedDelta:
        out = DeltaBuilder()
        if self._body:
            text = self._text.value() + text
            stop = text.find("<|")
            if stop >= 0:
                self._body = False
            else:
                stop = len(text) - partial_marker_len(text, "<|")
            if self._sent or text[:stop].strip():
                out.content(text[:stop])
                self._sent = True
                text = text[stop:]
            self._text = TextBuffer(text)
            return out.build()
        self._text.append(text)
        if self._open:
            return out.build()
        held = self._text.value()
        m = RESPONSE_OPEN.search(held)
        if m is None or "<|" in held[: m.start()]:
            return out.build()
        # No XTML marker before it: the text before it is in no answer's content and holds no call.
        self._open, self._body, self._text = m.group(0), True, TextBuffer()
        return self.feed(held[m.end() :])

    def finish(self, input_is_none: bool) -> tuple[ParsedDelta, bool]:
        """Flush; also returns whether empty content means None (not "")."""
        out = DeltaBuilder()
        # The body sent stands in as "x": no marker in it, so the calls and the rest of the content are the same.
        calls, content = extract_calls(self._open + "x" * self._sent + self._text.value())
        if calls and not self._none:
            for index, (name, arguments) in enumerate(calls):
                out.tool_calls.append(ToolCallDelta(index, id=make_tool_call_id(), name=name, arguments=arguments))
            if content is not None and not content.strip():
                content = None
        if content:
            out.content(content[int(self._sent) :])
        return out.build(), True
