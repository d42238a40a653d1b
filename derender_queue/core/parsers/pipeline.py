"""One chat choice's parser: reasoning stage -> tool stage -> request policy.

This composes the stages the way vLLM 0.33's ``DelegatingParser.parse`` does
(reasoning extraction first, then tool extraction on the content) and applies
``_extract_tool_calls``' tool_choice branches plus
``assemble_chat_message_fields`` (include_reasoning, keeps_tool_calls,
parallel_tool_calls, forced-content ``""``), so folding its deltas gives the
final message fields.

Token ids are accepted but unused: vLLM's non-streaming parse of these
parsers looks only at text.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

from .deltas import ParsedDelta, ToolCallDelta
from .kimi_k3 import KIMI_K3
from .passage import Passage
from .request import ParseRequest
from .stages import (
    Engines,
    ParserSpec,
    ToolStage,
    WholeStage,
    reasoning_stage,
    tool_stage,
    whole_stage,
)

STATE_VERSION = 1


class _Policy(NamedTuple):
    """Built for every chunk of a stream (a parser is resumed per chunk):
    a NamedTuple builds faster than a frozen dataclass."""

    include_reasoning: bool
    keeps_tool_calls: bool
    forces_tool_calls: bool
    # "required"/named with a tool parser: whitespace-only content and no
    # call gives content None (then "" because the call was forced).
    blank_content_is_none: bool
    first_call_only: bool


class ChatParser:
    """Incremental parser for one choice; see ``feed`` / ``finish``."""

    def __init__(
        self,
        spec: ParserSpec,
        request: ParseRequest,
        state: dict[str, Any] | None = None,
        engines: Engines | None = None,
        whole: bool = False,
    ) -> None:
        if state is not None and state.get("v") != STATE_VERSION:
            raise ValueError("parser state from an incompatible version")
        state = state or {}
        engines = engines or _NO_ENGINES
        self._harmony: WholeStage | None = whole_stage(spec, request, state.get("h"))
        harmony = self._harmony is not None
        self._reasoning = None if harmony else reasoning_stage(spec, request, state.get("r"), engines)
        saved = state.get("t")
        # A resumed tool stage is built when content first reaches it: a chunk
        # of reasoning never does, so it keeps the stage's state as it came.
        self._tools_saved: dict[str, Any] | None = None if harmony else saved
        self._build_tools = functools.partial(tool_stage, spec, request, saved, engines, whole)
        self._tools = None if harmony or saved is not None else self._build_tools()
        has_tool_stage = self._tools is not None or self._tools_saved is not None
        key = (spec, has_tool_stage)
        policy = request.memo.get(key)
        if policy is None:
            policy = request.memo[key] = _policy(spec, request, has_tool_stage=has_tool_stage)
        self._policy: _Policy = policy
        self._k3_legacy_tools = (
            spec.reasoning_parser == KIMI_K3
            and spec.tool_parser not in (None, KIMI_K3)
            and engines.tools is None
        )
        p = state.get("p", {})
        self._finished: bool = p.get("finished", False)
        self._input_seen: bool = p.get("input_seen", False)  # content reached tools
        self._input_nonws: bool = p.get("input_nonws", False)
        self._blank_held: str = p.get("blank_held", "")
        self._reasoning_out: bool = p.get("reasoning_out", False)
        self._content_out: bool = p.get("content_out", False)
        self._stage_called: bool = p.get("stage_called", False)

    def to_state(self) -> dict[str, Any]:
        """JSON-able state; restore with ``ParserFactory(request, state=...)``."""
        return {
            "v": STATE_VERSION,
            "r": self._reasoning.to_state() if self._reasoning else None,
            "t": self._tools.to_state() if self._tools else self._tools_saved,
            "h": self._harmony.to_state() if self._harmony else None,
            "p": {
                "finished": self._finished,
                "input_seen": self._input_seen,
                "input_nonws": self._input_nonws,
                "blank_held": self._blank_held,
                "reasoning_out": self._reasoning_out,
                "content_out": self._content_out,
                "stage_called": self._stage_called,
            },
        }

    def feed(self, delta_text: str, delta_token_ids: Sequence[int] = ()) -> ParsedDelta:
        """Parse the next chunk of decoded output (special tokens kept)."""
        if self._finished:
            raise RuntimeError("feed() after finish()")
        if self._harmony is not None:
            out = ParsedDelta()
            self._take_harmony(self._harmony.feed(delta_text), out)
            return out
        if self._reasoning is None:
            reasoning, content = "", delta_text
        else:
            reasoning, content = self._reasoning.feed(delta_text)
        out = ParsedDelta()
        self._emit_reasoning(reasoning, out)
        self._route_content(content, out)
        return out

    def passage(self) -> Passage | None:
        """Where text without any stage's stop character goes while it
        leaves this parser's state as it is (passage.py), or None."""
        if self._finished:
            return None
        if self._harmony is not None:
            first = _stage_passage(self._harmony)
            if first is not None and first.grows:
                first = first.under("h")  # Cohere's: it may send what it grows by
            if first is not None and first.field == "content":
                # _take_harmony: without a tool stage no blank content is held
                return first if self._content_out else None
        else:
            first = Passage("content") if self._reasoning is None else _stage_passage(self._reasoning)
            if first is not None and first.grows:
                return first.under("r")
        if first is None or first.field == "":
            return first
        if first.field == "reasoning":
            if not self._policy.include_reasoning:
                return first._replace(field="")
            return first if self._reasoning_out else None
        # content: the flags _route_content and _emit_content would set are set already
        if not (self._input_seen and self._input_nonws) or self._blank_held:
            return None
        tools = self._tool_stage()
        later = None if tools is None else _stage_passage(tools)
        if later is not None and later.grows:  # the tool stage holds all it is given
            plain = not (first.lexers or first.holds or first.strips or first.lead)
            return later.under("t")._replace(stops=first.stops | later.stops) if plain else None
        if not self._content_out:
            return None
        return first if tools is None else first.then(later)

    def finish(self) -> ParsedDelta:
        """End of output: flush held text and decide what was undecided."""
        if self._finished:
            raise RuntimeError("finish() called twice")
        self._finished = True
        out = ParsedDelta()
        if self._harmony is not None:
            self._take_harmony(self._harmony.finish(), out)
            none_if_empty = True  # HarmonyParser.parse: no content part, None
        else:
            reasoning, content = self._reasoning.finish() if self._reasoning else ("", "")
            self._emit_reasoning(reasoning, out)
            self._route_content(content, out)
            none_if_empty = self._finish_tools(out)
        if self._reasoning_needs_marker():
            out.reasoning = ""  # deepseek_r1 reports empty reasoning as ""
        if self._policy.forces_tool_calls:
            none_if_empty = False  # vLLM: content = content or ""
        if not self._content_out and not none_if_empty:
            out.content = ""  # the field exists, empty
            self._content_out = True
        return out

    # ── helpers ──────────────────────────────────────────────────────

    def _emit_reasoning(self, reasoning: str, out: ParsedDelta) -> None:
        if reasoning and self._policy.include_reasoning:
            out.reasoning = (out.reasoning or "") + reasoning
            self._reasoning_out = True

    def _reasoning_needs_marker(self) -> bool:
        return (
            self._reasoning is not None
            and not self._reasoning.reasoning_nullable
            and self._policy.include_reasoning
            and not self._reasoning_out
        )

    def _route_content(self, content: str, out: ParsedDelta) -> None:
        if not content:
            return
        self._input_seen = True
        if not self._input_nonws and content.strip():
            self._input_nonws = True
        tools = self._tool_stage()
        if tools is None:
            self._emit_content(content, out)
            return
        self._take_tool_output(tools.feed(content), out)

    def _finish_tools(self, out: ParsedDelta) -> bool:
        """Flush the tool stage; returns whether empty content means None."""
        input_is_none = (
            self._reasoning is not None
            and self._reasoning.content_nullable
            and not self._input_seen
        )
        tools = self._tool_stage()
        if tools is None:
            return input_is_none and not self._k3_legacy_tools
        delta, none_if_empty = tools.finish(input_is_none)
        if self._k3_legacy_tools:
            none_if_empty = False  # KimiK3Parser: a legacy tool parser's content for "" is ""
        self._take_tool_output(delta, out)
        held, self._blank_held = self._blank_held, ""
        if held and not self._stage_called:
            return True  # forced tool_choice, blank content, no call: None
        if held:  # unreachable in practice: a call needs non-blank input
            out.content = (out.content or "") + held
            self._content_out = True
        return none_if_empty

    def _tool_stage(self) -> ToolStage | None:
        if self._tools is None and self._tools_saved is not None:
            self._tools, self._tools_saved = self._build_tools(), None
        return self._tools

    def _take_harmony(self, delta: ParsedDelta, out: ParsedDelta) -> None:
        self._emit_reasoning(delta.reasoning or "", out)
        self._take_tool_output(delta, out)

    def _take_tool_output(self, delta: ParsedDelta, out: ParsedDelta) -> None:
        if delta.tool_calls:
            self._stage_called = True
            out.tool_calls.extend(self._kept_calls(delta.tool_calls))
        if delta.content:
            self._emit_content(delta.content, out)

    def _kept_calls(self, calls: list[ToolCallDelta]) -> list[ToolCallDelta]:
        if not self._policy.keeps_tool_calls:
            return []
        if self._policy.first_call_only:
            return [c for c in calls if c.index == 0]
        return calls

    def _emit_content(self, text: str, out: ParsedDelta) -> None:
        # Hold whitespace while the tool stage's input is still blank: a
        # forced tool_choice turns blank content into None.
        if self._policy.blank_content_is_none and not self._input_nonws:
            self._blank_held += text
            return
        text, self._blank_held = self._blank_held + text, ""
        if text:
            out.content = (out.content or "") + text
            self._content_out = True


_NO_ENGINES = Engines(None, None)


def _stage_passage(stage: object) -> Passage | None:
    """A stage's passage; None for one that does not offer any."""
    passage = getattr(stage, "passage", None)
    return None if passage is None else passage()


def _policy(spec: ParserSpec, request: ParseRequest, *, has_tool_stage: bool) -> _Policy:
    forces = request.forces_tool_calls
    # keeps_tool_calls: forced, or "auto" with tools and auto tools enabled.
    # (An explicit tool_choice null is parsed like "auto" but keeps nothing.)
    auto = (
        spec.enable_auto_tools
        and spec.tool_parser is not None
        and request.tool_choice == "auto"
        and bool(request.tools)
    )
    return _Policy(
        include_reasoning=request.include_reasoning,
        keeps_tool_calls=forces or auto,
        forces_tool_calls=forces,
        # (KimiK3Parser returns its content as it is.)
        blank_content_is_none=forces and has_tool_stage and spec.tool_parser != KIMI_K3,
        first_call_only=request.parallel_tool_calls is False,
    )
