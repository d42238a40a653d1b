"""``muse`` (alias ``musespark``) and ``muse_glimmer`` reasoning and tools:
vLLM 0.34's legacy ``MuseReasoningParser`` / ``MuseToolParser`` and their
Glimmer profiles (``MuseGlimmerReasoningParser``, ``MuseGlimmerToolParser``),
as stages.

Muse writes channel-scoped messages with ATEM tool markup::

    to=self<|message|>...reasoning...<|eom|>
    <|start|>assistant to=get_weather<|message|><atem:function_calls>
    <atem:invoke name="get_weather"><atem:parameter name="city">Paris</atem:parameter>
    </atem:invoke></atem:function_calls><|eom|>
    <|start|>assistant to=user<|message|>...answer...<|eot|>

Not an engine family, and not streamed as it comes, because vLLM's
non-streaming parse decides every field from the whole text with regular
expressions, and a later marker changes what came before:

* reasoning: an output without any ``<|message|>`` header is all content;
  one header anywhere makes the text before it vanish.  Muse (Spark) takes
  the bodies of recipient-less and ``to=self`` messages as reasoning and of
  ``to=user`` / ``to=commentary`` ones as content, unless a tool channel
  (any other recipient) holds ATEM markup: then the content is every
  non-reasoning, non-developer message with its framing, for the tool
  parser.  Glimmer joins closed ``to=self`` bodies with newlines, adds an
  unclosed one, and returns the first ``to=user`` body (or, with ATEM markup
  outside reasoning, the text with reasoning spans cut out).
* tools: the complete ``<atem:invoke>`` blocks of the tool channels' bodies
  (the whole text when there is no header at all); a call's content is then
  the ``to=user``/``to=commentary`` bodies (Glimmer: recipient-less and
  ``to=user``); without a call the content stays as it came.  Muse decodes a
  parameter as JSON unless the tool's schema admits a string
  (``schema_types.py``, as ``poolside_v1``); Glimmer decodes JSON where it can.

So each stage holds its text until the end (the state grows with the output)
and answers as vLLM's non-streaming parse does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from .buffer import TextBuffer
from .deltas import DeltaBuilder, ParsedDelta, ToolCallDelta
from .ids import make_tool_call_id
from .passage import Passage, holding
from .request import ParseRequest
from .schema_types import allowed_types, convert_value, parameter_types

MUSE, MUSE_GLIMMER = "muse", "muse_glimmer"
NAMES = {MUSE: False, "musespark": False, MUSE_GLIMMER: True}  # name -> Glimmer profile

# vLLM's patterns (regex module); its \s lacks U+001C..U+001F, stdlib's has them.
_NS_LT = r"(?:[^\s<]|[\x1c-\x1f])"  # regex's [^\s<]
_WS = r"[^\S\x1c-\x1f]"  # regex's \s
_HSP = r"[^\S\n\x1c-\x1f]"  # regex's [^\S\n]

_EOM, _EOT = "<|eom|>", "<|eot|>"
_FUNCTION_CALLS_OPEN = "<atem:function_calls>"
_INVOKE_OPEN = "<atem:invoke"

# ---- the reasoning parser (muse_reasoning_parser.py) -----------------------
_HEADER_PAT = rf"to={_NS_LT}+<\|message\|>"
_MUSE_HEADER = re.compile(rf"(?:<\|start\|>assistant{_WS}*)?(?:to=(?P<recipient>{_NS_LT}+))?<\|message\|>")
_MUSE_BOUNDARY = re.compile(r"<\|eom\|>|<\|eot\|>|<\|start\|>")
_MUSE_NON_TOOL = (None, "self", "user", "commentary", "developer")
_COLLAPSE = re.compile(r"<\|eom\|>(?:(?!to=self<\|message\|>).)*?to=self<\|message\|>", re.DOTALL)
_REASONING = re.compile(r"to=self<\|message\|>(.*?)<\|eom\|>", re.DOTALL)
_CONTENT = re.compile(r"to=user<\|message\|>(.*?)(?=<\|eot\|>|<\|eom\|>|$)", re.DOTALL)
_STRIP_REASONING = re.compile(rf"(?:<\|start\|>assistant{_WS}*)?to=self<\|message\|>.*?<\|eom\|>", re.DOTALL)
_STRIP_OPEN_REASONING = re.compile(
    rf"(?:<\|start\|>assistant{_WS}*)?to=self<\|message\|>(?:(?!<\|eom\|>)(?!{_HEADER_PAT}).)*(?={_HEADER_PAT}|$)",
    re.DOTALL,
)
_OPEN_REASONING = re.compile(
    rf"to=self<\|message\|>((?:(?!<\|eom\|>)(?!{_HEADER_PAT}).)*)(?={_HEADER_PAT}|$)", re.DOTALL
)


def _has_atem(text: str) -> bool:
    return _FUNCTION_CALLS_OPEN in text or _INVOKE_OPEN in text


def _muse_messages(text: str) -> Iterator[tuple[str | None, str, str]]:
    """``_muse_messages``: (recipient, body, framed text) per header."""
    headers = list(_MUSE_HEADER.finditer(text))
    for i, header in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        boundary = _MUSE_BOUNDARY.search(text, header.end(), end)
        body_end = boundary.start() if boundary else end
        yield header["recipient"], text[header.end() : body_end], text[header.start() : end]


def split_reasoning(text: str, glimmer: bool) -> tuple[str | None, str | None]:
    """``MuseReasoningParser.extract_reasoning`` (Glimmer: ``_glimmer_compat``)."""
    if glimmer:
        return _glimmer_reasoning(text)
    messages = list(_muse_messages(text))
    if not messages:
        return None, text or None
    reasoning = "".join(body for rcpt, body, _ in messages if rcpt in (None, "self")) or None
    if any(rcpt not in _MUSE_NON_TOOL and _has_atem(body) for rcpt, body, _ in messages):
        content = "".join(framed for rcpt, _, framed in messages if rcpt not in (None, "self", "developer"))
    else:
        content = "".join(body for rcpt, body, _ in messages if rcpt in ("user", "commentary"))
    return reasoning, content or None


def _glimmer_reasoning(text: str) -> tuple[str | None, str | None]:
    matches = _REASONING.findall(_COLLAPSE.sub("\n", text))
    reasoning = "\n".join(matches) if matches else None
    open_match = _OPEN_REASONING.search(text)
    if open_match and open_match.group(1):
        partial = open_match.group(1)
        reasoning = f"{reasoning}\n{partial}" if reasoning else partial
    remainder = _STRIP_OPEN_REASONING.sub("", _STRIP_REASONING.sub("", text))
    if _has_atem(remainder):
        return reasoning, remainder or None
    content_match = _CONTENT.search(text)
    if content_match:
        return reasoning, content_match.group(1) or None
    if "to=self<|message|>" in text:
        return reasoning, None
    return None, text or None


# ---- the tool parser (muse_tool_parser.py) ---------------------------------
_MSG_HEADER = re.compile(rf"(?:<\|start\|>{_WS}*assistant)?{_HSP}*(?:to=(?P<rcpt>[A-Za-z0-9_.\-]+))?<\|message\|>")
_MSG_END = re.compile(r"<\|eom\|>|<\|eot\|>")
_INVOKE = re.compile(r"(<atem:invoke\b.*?</atem:invoke>)", re.DOTALL)
_NAME = re.compile(r'<atem:invoke\b[^>]*?\bname="([^"]+)"')
_PARAM = re.compile(
    r'<atem:parameter\b[^>]*?\bname="(?P<key>[^"]+)"[^>]*?>(?P<value>.*?)</atem:parameter>', re.DOTALL
)


class _Profile:
    """``MuseToolParser``'s class attributes (Glimmer overrides them)."""

    def __init__(self, glimmer: bool) -> None:
        self.typed = not glimmer  # _preserve_string_parameters
        self.reasoning: tuple[str | None, ...] = ("self",) if glimmer else (None, "self")
        self.content: tuple[str | None, ...] = (None, "user") if glimmer else ("user", "commentary")
        self.non_tool: tuple[str, ...] = ("self", "user") if glimmer else ("self", "user", "commentary", "developer")


def _iter_messages(text: str) -> Iterator[tuple[str | None, str]]:
    """``_iter_messages``: (recipient, body) per message."""
    pos = 0
    while pos < len(text):
        header = _MSG_HEADER.search(text, pos)
        if header is None:
            return
        body_start = header.end()
        end = _MSG_END.search(text, body_start)
        nxt = _MSG_HEADER.search(text, body_start)
        body_end = end.start() if end is not None else len(text)
        if nxt is not None and nxt.start() < body_end:
            body_end = next_pos = nxt.start()
        else:
            next_pos = end.end() if end is not None else len(text)
        body = text[body_start:body_end]
        start_tok = body.find("<|start|>")
        yield header["rcpt"], body if start_tok == -1 else body[:start_tok]
        pos = next_pos


def _decode(raw: str) -> Any:
    """``_decode_value``: JSON where it parses, else the raw text."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _normalize_name(emitted: str, registered: set[str]) -> str:
    """``MuseToolParser._normalize_name``: ``get_weather.get_weather`` -> ``get_weather``."""
    if not registered or emitted in registered:
        return emitted
    head, sep, tail = emitted.partition(".")
    return head if sep and head == tail and head in registered else emitted


def extract_calls(text: str, profile: _Profile, tools: list[dict[str, Any]] | None) -> list[tuple[str, str]]:
    """``MuseToolParser._parse_tool_calls``: (name, arguments JSON) per call."""
    bodies = [body for rcpt, body in _iter_messages(text) if rcpt is not None and rcpt not in profile.non_tool]
    if bodies:
        scoped = "\n".join(bodies)
    elif _MSG_HEADER.search(text) is None and _has_atem(text):
        scoped = text
    else:
        return []
    registered = {name for tool in tools or [] if (name := (tool.get("function") or {}).get("name"))}
    types = parameter_types(tools) if profile.typed else {}
    calls = []
    for invoke in _INVOKE.findall(scoped):
        name_m = _NAME.search(invoke)
        if not name_m:
            continue
        name = _normalize_name(name_m.group(1), registered)
        args = {m["key"]: convert_value(m["value"], allowed_types(types, name, m["key"]), _decode)
                for m in _PARAM.finditer(invoke)}  # fmt: skip
        calls.append((name, json.dumps(args, ensure_ascii=False)))
    return calls


def call_content(text: str, profile: _Profile) -> str | None:
    """``MuseToolParser._extract_content``."""
    content: list[str] = []
    reasoning: list[str] = []
    for rcpt, body in _iter_messages(text):
        if rcpt in profile.reasoning:
            reasoning.append(body)
        elif rcpt in profile.content:
            content.append(body)
    if any(content):
        return "".join(content)
    if not any(reasoning) and _MSG_HEADER.search(text) is None:
        return text or None
    return None


class MuseReasoningStage:
    """Holds the output; splits it at the end as ``extract_reasoning`` does."""

    reasoning_nullable = True
    content_nullable = True

    def __init__(self, glimmer: bool, state: dict[str, Any] | None = None) -> None:
        self._glimmer = glimmer
        self._text = TextBuffer((state or {}).get("text", ""))

    def to_state(self) -> dict[str, Any]:
        return {"text": self._text.dump()}

    def feed(self, text: str) -> tuple[str, str]:
        self._text.append(text)
        return "", ""

    def passage(self) -> Passage:
        return holding("text")  # everything, until the end

    def finish(self) -> tuple[str, str]:
        reasoning, content = split_reasoning(self._text.value(), self._glimmer)
        # Glimmer's joined reasoning can be "" (an empty to=self block): present, not None.
        self.reasoning_nullable = reasoning is None
        return reasoning or "", content or ""


class MuseToolStage:
    """``MuseToolParser.extract_tool_calls`` over the held content, as a
    legacy parser's answer: no call, the content as it came."""

    def __init__(self, glimmer: bool, request: ParseRequest, state: dict[str, Any] | None = None) -> None:
        self._profile = _Profile(glimmer)
        self._tools = request.tools
        self._text = TextBuffer((state or {}).get("text", ""))

    def to_state(self) -> dict[str, Any]:
        return {"text": self._text.dump()}

    def feed(self, text: str) -> ParsedDelta:
        self._text.append(text)
        return ParsedDelta()

    def passage(self) -> Passage:
        return holding("text")  # everything, until the end

    def finish(self, input_is_none: bool) -> tuple[ParsedDelta, bool]:
        """Flush; also returns whether empty content means None (not "")."""
        out = DeltaBuilder()
        text = self._text.value()
        calls = extract_calls(text, self._profile, self._tools) if _has_atem(text) else []
        if not calls:
            out.content(text)
            return out.build(), input_is_none
        for index, (name, arguments) in enumerate(calls):
            out.tool_calls.append(ToolCallDelta(index, id=make_tool_call_id(), name=name, arguments=arguments))
        content = call_content(text, self._profile)
        if content and content.strip():
            out.content(content)
        return out.build(), True
