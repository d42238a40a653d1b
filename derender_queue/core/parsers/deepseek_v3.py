"""``deepseek_v3`` and ``holo2`` reasoning and the ``deepseek_v3`` /
``deepseek_v31`` tool parsers: vLLM 0.34's legacy (non-engine) classes, as
stages.  ``holo2`` is ``DeepSeekV3ReasoningWithThinkingParser``: the
``deepseek_v3`` reasoning parser with thinking on unless ``thinking`` or
``enable_thinking`` is given (not None).

Not engine families, because vLLM does not parse them with its engine: the
reasoning parser is ``deepseek_r1`` with thinking on and vLLM's identity
parser otherwise (``DeepSeekV3ReasoningParser``), and the tool parsers run
one regular expression over the whole content (``extract_tool_calls``)::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
    ```json
    {"city": "Paris"}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>                          (V3)

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>
    {"city": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>            (V3.1)

vLLM's rules, all decided on the whole text: without ``<｜tool▁calls▁begin｜>``
nothing is parsed (the content is the text as it is).  With it, every match
of the call pattern anywhere in the text is a call (names and arguments as
written, not checked), and the content is the text before the first
``<｜tool▁calls▁begin｜>`` (V3: plus the text after the last
``<｜tool▁calls▁end｜>``), None when empty or blank.  V3 captures a call's
``type`` too; one that is not ``function`` fails validation and vLLM returns
no calls and the whole text as content.

So the content before ``<｜tool▁calls▁begin｜>`` streams as it comes (a blank
prefix is held: a call section makes it None), and from the first marker
that can start a call or the section (or end one, for V3's content) the
text is held until the end decides.  State: that held section, a blank
prefix, and a partial marker (< 24 chars).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .buffer import TextBuffer
from .deltas import DeltaBuilder, ParsedDelta, ToolCallDelta, past_blank
from .ids import make_tool_call_id
from .lexer import partial_marker_len
from .passage import Passage
from .r1 import R1ReasoningStage

V3, V31 = "deepseek_v3", "deepseek_v31"
CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"

# vLLM's patterns (regex module); `.` and [\s\S] read the same in stdlib re.
_CALL_RE = {
    V3: re.compile(
        r"<｜tool▁call▁begin｜>(?P<type>.*)<｜tool▁sep｜>(?P<function_name>.*)\n```json\n"
        r"(?P<function_arguments>[\s\S]*?)\n```<｜tool▁call▁end｜>"
    ),
    V31: re.compile(r"<｜tool▁call▁begin｜>(?P<function_name>.*?)<｜tool▁sep｜>(?P<function_arguments>[\s\S]*?)"
                    r"<｜tool▁call▁end｜>"),
}  # fmt: skip


def thinking_on(chat_template_kwargs: Mapping[str, Any]) -> bool:
    """``DeepSeekV3ReasoningParser.__init__``: ``thinking`` or ``enable_thinking``."""
    kw = chat_template_kwargs
    return bool(kw.get("thinking", False)) or bool(kw.get("enable_thinking", False))


class IdentityReasoningStage:
    """vLLM's ``IdentityReasoningParser``: no reasoning, the output is content."""

    reasoning_nullable = True
    content_nullable = False  # (None, output): an empty output is content ""

    def feed(self, text: str) -> tuple[str, str]:
        return "", text

    def finish(self) -> tuple[str, str]:
        return "", ""

    def to_state(self) -> dict[str, Any]:
        return {}

    def passage(self) -> Passage:
        """All of the output is content, whatever it holds (passage.py)."""
        return Passage("content")


def holo2_thinking_on(chat_template_kwargs: Mapping[str, Any]) -> bool:
    """``DeepSeekV3ReasoningWithThinkingParser.__init__``: both keys None
    (absent or null) mean thinking; otherwise V3's rule."""
    kw = chat_template_kwargs
    if kw.get("thinking") is None and kw.get("enable_thinking") is None:
        return True
    return thinking_on(kw)


def deepseek_v3_reasoning(
    chat_template_kwargs: Mapping[str, Any], state: dict[str, Any] | None, *, holo2: bool = False
) -> R1ReasoningStage | IdentityReasoningStage:
    if (holo2_thinking_on if holo2 else thinking_on)(chat_template_kwargs):
        return R1ReasoningStage(state)
    return IdentityReasoningStage()


class DeepSeekV3ToolStage:
    def __init__(self, variant: str, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self._variant = variant
        self._regex = _CALL_RE[variant]
        # Markers where the held section may start: a call, the section, and
        # for V3 (whose content takes the text after the last section end) its end.
        self._starts = (CALL_BEGIN, CALLS_BEGIN, CALLS_END) if variant == V3 else (CALL_BEGIN, CALLS_BEGIN)
        self._in_section: bool = s.get("sec", False)  # <｜tool▁calls▁begin｜> seen
        self._partial: str = s.get("part", "")  # a partial <｜tool▁calls▁begin｜> not yet sent as content
        self._ws: str = s.get("ws", "")  # a blank prefix, held
        self._nonws: bool = s.get("nonws", False)
        held = s.get("held")
        self._held = None if held is None else TextBuffer(held)  # the text from the first start marker
        self._look: str = s.get("look", "")  # the last characters before it, for a marker split by chunks

    def to_state(self) -> dict[str, Any]:
        return {"sec": self._in_section, "part": self._partial, "ws": self._ws, "nonws": self._nonws,
                "held": None if self._held is None else self._held.dump(), "look": self._look}  # fmt: skip

    def feed(self, text: str) -> ParsedDelta:
        out = DeltaBuilder()
        self._hold(text)
        if not self._in_section:
            self._prefix(text, out)
        return out.build()

    def _hold(self, text: str) -> None:
        if self._held is not None:
            self._held.append(text)
            return
        window = self._look + text
        found = [at for m in self._starts if (at := window.find(m)) >= 0]
        if found:
            self._held, self._look = TextBuffer(window[min(found) :]), ""
        else:
            self._look = window[-(len(CALLS_BEGIN) - 1) :]

    def _prefix(self, text: str, out: DeltaBuilder) -> None:
        buf = self._partial + text
        at = buf.find(CALLS_BEGIN)
        if at >= 0:
            self._in_section, self._partial = True, ""
            self._emit(buf[:at], out)
            return
        keep = partial_marker_len(buf, CALLS_BEGIN)
        self._partial = buf[len(buf) - keep :]
        self._emit(buf[: len(buf) - keep], out)

    def _emit(self, text: str, out: DeltaBuilder) -> None:
        self._ws, self._nonws = past_blank(self._ws, self._nonws, text, out)

    def finish(self, input_is_none: bool) -> tuple[ParsedDelta, bool]:
        """Flush; also returns whether empty content means None (not "")."""
        out = DeltaBuilder()
        if not self._in_section:  # no call section: the content as it was
            out.content(self._ws + self._partial)
            return out.build(), input_is_none
        held = self._held.value() if self._held is not None else ""
        section = held.find(CALLS_BEGIN)
        calls = self._calls(held)
        if calls is None:  # vLLM failed: the whole text is the content
            out.content(self._ws + held[section:])
            return out.build(), input_is_none
        for index, (name, arguments) in enumerate(calls):
            out.tool_calls.append(ToolCallDelta(index, id=make_tool_call_id(), name=name, arguments=arguments))
        end = held.rfind(CALLS_END) if self._variant == V3 else -1
        rest = held[end + len(CALLS_END) :] if end >= 0 else ""
        if self._nonws:
            out.content(rest)
        elif (self._ws + rest).strip():
            out.content(self._ws + rest)
        return out.build(), True

    def _calls(self, held: str) -> list[tuple[str, str]] | None:
        if self._variant == V31:
            return [(m.group("function_name"), m.group("function_arguments")) for m in self._regex.finditer(held)]
        matches = list(self._regex.finditer(held))
        if any(m.group("type") != "function" for m in matches):
            return None  # pydantic rejects ToolCall(type=...) and vLLM catches it
        return [(m.group("function_name"), m.group("function_arguments")) for m in matches]
