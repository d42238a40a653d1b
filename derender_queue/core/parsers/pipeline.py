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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from .deepseek_v3 import DeepSeekV3ToolStage, deepseek_v3_reasoning
from .deltas import ParsedDelta, ToolCallDelta
from .engine import EngineReasoning, EngineTools, reasoning_family, tool_family
from .hermes import HermesToolStage
from .k2_horizon import K2_HORIZON, K2HorizonReasoningStage, K2HorizonToolStage
from .kimi_k3 import KIMI_K3, KimiK3ReasoningStage, KimiK3ToolStage
from .lexer import LiteralLexer
from .r1 import R1ReasoningStage
from .request import ParseRequest
from .v4_grammar import thinking_enabled
from .v4_reasoning import V4ReasoningStage
from .v4_tools import V4ToolStage

STATE_VERSION = 1

R1, V4, HERMES = "deepseek_r1", "deepseek_v4", "hermes"
# vLLM 0.34 registers the Hermes parser under these names too.
HERMES_ALIASES = ("qwen3_json",)
# vLLM's legacy DeepSeek V3 classes (parsers/deepseek_v3.py).
DEEPSEEK_V3, DEEPSEEK_V31 = "deepseek_v3", "deepseek_v31"
# vLLM's DeepSeekV3ReasoningWithThinkingParser: deepseek_v3 reasoning, thinking on by default.
HOLO2 = "holo2"


class Engines(NamedTuple):
    """The engine families' passes a server configured (engine/registry.py)."""

    reasoning: EngineReasoning | None
    tools: EngineTools | None


class ReasoningStage(Protocol):
    reasoning_nullable: bool
    content_nullable: bool

    def feed(self, text: str) -> tuple[str, str]: ...
    def finish(self) -> tuple[str, str]: ...
    def to_state(self) -> dict[str, Any]: ...


class ToolStage(Protocol):
    def feed(self, text: str) -> ParsedDelta: ...
    def finish(self, input_is_none: bool) -> tuple[ParsedDelta, bool]: ...
    def to_state(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ParserSpec:
    """Server-side parser configuration (``--reasoning-parser`` etc.).

    ``tool_parser`` is the name vLLM actually builds: None unless
    ``--enable-auto-tool-choice`` is on.
    """

    reasoning_parser: str | None
    tool_parser: str | None
    enable_auto_tools: bool

    @property
    def engine_based(self) -> bool:
        # vLLM's DelegatingParser._engine_based: every configured stage is
        # a ParserEngine adapter.  It changes what content a turn returns.
        r, t = self.reasoning_parser, self.tool_parser
        # K2 Horizon's legacy tool parser says it is engine-based too.
        return (r in (None, V4) or reasoning_family(r) is not None) and (
            t in (None, V4, K2_HORIZON) or tool_family(t) is not None
        )

    @property
    def parses_tool_content(self) -> bool:
        # KimiK3Parser._extract_tool_calls: the tool parser's content even
        # without calls or with tool_choice "none", as an engine composition's.
        return self.engine_based or KIMI_K3 in (self.reasoning_parser, self.tool_parser)


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
        lexer: LiteralLexer | None,
        request: ParseRequest,
        state: dict[str, Any] | None = None,
        engines: Engines | None = None,
        whole: bool = False,
    ) -> None:
        if state is not None and state.get("v") != STATE_VERSION:
            raise ValueError("parser state from an incompatible version")
        state = state or {}
        engines = engines or _NO_ENGINES
        self._reasoning = _reasoning_stage(spec, lexer, request, state.get("r"), engines)
        self._tools = _tool_stage(spec, lexer, request, state.get("t"), engines, whole)
        self._policy = _policy(spec, request, has_tool_stage=self._tools is not None)
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
            "t": self._tools.to_state() if self._tools else None,
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
        if self._reasoning is None:
            reasoning, content = "", delta_text
        else:
            reasoning, content = self._reasoning.feed(delta_text)
        out = ParsedDelta()
        self._emit_reasoning(reasoning, out)
        self._route_content(content, out)
        return out

    def finish(self) -> ParsedDelta:
        """End of output: flush held text and decide what was undecided."""
        if self._finished:
            raise RuntimeError("finish() called twice")
        self._finished = True
        out = ParsedDelta()
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
        if self._tools is None:
            self._emit_content(content, out)
            return
        self._take_tool_output(self._tools.feed(content), out)

    def _finish_tools(self, out: ParsedDelta) -> bool:
        """Flush the tool stage; returns whether empty content means None."""
        input_is_none = (
            self._reasoning is not None
            and self._reasoning.content_nullable
            and not self._input_seen
        )
        if self._tools is None:
            return input_is_none and not self._k3_legacy_tools
        delta, none_if_empty = self._tools.finish(input_is_none)
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


def _reasoning_stage(
    spec: ParserSpec,
    lexer: LiteralLexer | None,
    request: ParseRequest,
    state: dict[str, Any] | None,
    engines: Engines,
) -> ReasoningStage | None:
    if engines.reasoning is not None:
        return engines.reasoning.stage(request, state)
    if spec.reasoning_parser == R1:
        return R1ReasoningStage(state)
    if spec.reasoning_parser in (DEEPSEEK_V3, HOLO2):
        return deepseek_v3_reasoning(request.chat_template_kwargs, state, holo2=spec.reasoning_parser == HOLO2)
    if spec.reasoning_parser == K2_HORIZON:
        return K2HorizonReasoningStage(request.chat_template_kwargs, state)
    if spec.reasoning_parser == KIMI_K3:
        return KimiK3ReasoningStage(request, state)
    if spec.reasoning_parser == V4:
        assert lexer is not None
        thinking = thinking_enabled(request.chat_template_kwargs)
        return V4ReasoningStage(lexer, thinking, state)
    return None


def _tool_stage(
    spec: ParserSpec,
    lexer: LiteralLexer | None,
    request: ParseRequest,
    state: dict[str, Any] | None,
    engines: Engines,
    whole: bool,
) -> ToolStage | None:
    """The stage for ``DelegatingParser._extract_tool_calls``' branch."""
    name = spec.tool_parser
    if name is None:
        return None
    none = request.tool_choice == "none"
    if name == KIMI_K3:  # KimiK3Parser reads the content even with tool_choice "none"
        return KimiK3ToolStage(none, state)
    # Legacy compositions return the content untouched; an all-engine
    # one still runs the engine (dropping the calls, and with tools
    # suppressing them) so its content loses the markup.
    if none and not (spec.engine_based or (spec.parses_tool_content and engines.tools is not None)):
        return None
    if name == K2_HORIZON:
        return K2HorizonToolStage(request, none=none, engine_based=spec.engine_based, state=state)
    if engines.tools is not None:
        suppress = none and bool(request.tools)
        legacy = not spec.parses_tool_content
        return engines.tools.stage(request, state, suppress=suppress, legacy=legacy, whole=whole)
    if none:
        return _v4_tool_stage(spec, lexer, request, state, suppress=bool(request.tools))
    if name == HERMES or name in HERMES_ALIASES:
        return HermesToolStage(state)
    if name in (DEEPSEEK_V3, DEEPSEEK_V31):
        return DeepSeekV3ToolStage(name, state)
    return _v4_tool_stage(spec, lexer, request, state, suppress=False)


def _v4_tool_stage(
    spec: ParserSpec,
    lexer: LiteralLexer | None,
    request: ParseRequest,
    state: dict[str, Any] | None,
    *,
    suppress: bool,
) -> V4ToolStage:
    assert lexer is not None
    return V4ToolStage(
        lexer,
        tools=request.tools,
        suppress=suppress,
        skip_reasoning=spec.reasoning_parser is None,
        legacy=not spec.engine_based,
        state=state,
    )


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
