"""Which stage each parser name gets (vLLM's ``ParserManager`` and
``DelegatingParser._extract_tool_calls`` branches): the engine families'
passes (``engine/``), vLLM's legacy parsers written beside the engine (one
module each), harmony (both passes in one stage) and the forced
``tool_choice`` stage (``forced.py``).  ``pipeline.ChatParser`` composes
what these return.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from . import apertus, dots, json_tools, lfm2, minicpm5, olmo3_tools  # noqa: F401  (register their held_tools.py parsers)
from .append_think import NAME as APPEND_THINK
from .append_think import AppendThinkStage
from .cohere import CohereStage
from .cohere_filter import NAMES as COHERE
from .deepseek_v3 import DeepSeekV3ToolStage, deepseek_v3_reasoning
from .deltas import ParsedDelta
from .engine import EngineReasoning, EngineTools, reasoning_family, tool_family
from .ernie45 import NAME as ERNIE45
from .ernie45 import Ernie45ReasoningStage, Ernie45ToolStage
from .forced import ForcedToolStage
from .functiongemma import NAME as FUNCTIONGEMMA
from .functiongemma import FunctionGemmaToolStage
from .gigachat3 import NAME as GIGACHAT3
from .gigachat3 import GigaChat3ToolStage
from .granite_reasoning import GRANITE, GraniteReasoningStage
from .harmony import REASONING_NAME as HARMONY_REASONING
from .harmony import TOOL_NAME as HARMONY_TOOLS
from .harmony import HarmonyStage
from .held_tools import HELD_TOOLS, HeldToolStage
from .hermes import HermesToolStage
from .hunyuan import A13B, HY_V3, HY_V4, A13BReasoningStage, hy_reasoning
from .k2_horizon import K2_HORIZON, K2HorizonReasoningStage, K2HorizonToolStage
from .kimi_k3 import KIMI_K3, KimiK3ReasoningStage, KimiK3ToolStage
from .minimax_m3_reasoning import NAME as MINIMAX_M3
from .minimax_m3_reasoning import MiniMaxM3ReasoningStage
from .muse import NAMES as MUSE_NAMES
from .muse import MuseReasoningStage, MuseToolStage
from .olmo3 import NAME as OLMO3
from .olmo3 import Olmo3ReasoningStage
from .phi4_mini import PHI4_MINI_JSON, Phi4MiniToolStage
from .poolside_v1 import NAME as POOLSIDE_V1
from .poolside_v1 import PoolsideV1ToolStage
from .pythonic import LLAMA4_PYTHONIC, PYTHONIC, PythonicToolStage
from .r1 import R1ReasoningStage
from .request import ParseRequest
from .response_template import ResponseTemplateStage
from .step3_tools import NAME as STEP3_TOOLS
from .step3_tools import Step3ToolStage

R1, HERMES = "deepseek_r1", "hermes"
# vLLM 0.34 registers its DeepSeek R1 reasoning parser under this name too.
R1_ALIASES = ("step5",)
# Step3ReasoningParser: reasoning up to the first </think>, as R1 once it saw <think>.
STEP3 = "step3"
# vLLM 0.34 registers the Hermes parser under these names too.
HERMES_ALIASES = ("qwen3_json",)
# vLLM's legacy DeepSeek V3 classes (parsers/deepseek_v3.py).
DEEPSEEK_V3, DEEPSEEK_V31 = "deepseek_v3", "deepseek_v31"
# vLLM's DeepSeekV3ReasoningWithThinkingParser: deepseek_v3 reasoning, thinking on by default.
HOLO2 = "holo2"
# Legacy Python-list parsers (pythonic.py); no structural tag, so
# vLLM keeps supports_required_and_named for them (forced.py).
PYTHONIC_PARSERS = (PYTHONIC, LLAMA4_PYTHONIC)
# Hermes subclasses that only respell the wrapper tags (LongcatFlashToolParser).
HERMES_RESPELLED = {"longcat": ("<longcat_tool_call>", "</longcat_tool_call>")}


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
    # hf/beam (response_template.py): the tokenizer's loaded template and a
    # decoder of the prompt ids; None for every other parser.
    response_template: Any = field(default=None, compare=False)
    decode: Any = field(default=None, compare=False)

    # A model's spec answers these every chunk: each is worked out once.
    @functools.cached_property
    def harmony(self) -> bool:
        """gpt-oss: one harmony stage replaces both passes (``harmony.py``)."""
        return self.reasoning_parser == HARMONY_REASONING or self.tool_parser == HARMONY_TOOLS

    @functools.cached_property
    def engine_based(self) -> bool:
        # vLLM's DelegatingParser._engine_based: every configured stage is
        # a ParserEngine adapter.  It changes what content a turn returns.
        r, t = self.reasoning_parser, self.tool_parser
        # K2 Horizon's legacy tool parser says it is engine-based too.
        return (r is None or reasoning_family(r) is not None) and (
            t in (None, K2_HORIZON) or tool_family(t) is not None
        )

    @functools.cached_property
    def parses_tool_content(self) -> bool:
        # KimiK3Parser._extract_tool_calls: the tool parser's content even
        # without calls or with tool_choice "none", as an engine composition's.
        return self.engine_based or KIMI_K3 in (self.reasoning_parser, self.tool_parser)


def harmony_stage(spec: ParserSpec, state: dict[str, Any] | None) -> HarmonyStage | CohereStage | None:
    """The one stage for both passes: harmony's, or Cohere Command's
    (vLLM's ``CohereCommandParser``, built when either name is Cohere's; its
    preset is the reasoning parser's when there is one)."""
    cohere = [name for name in (spec.reasoning_parser, spec.tool_parser) if name in COHERE]
    if cohere:
        return CohereStage(cohere[0], tools=spec.tool_parser is not None, state=state)
    if not spec.harmony:
        return None
    return HarmonyStage(reasoning=spec.reasoning_parser == HARMONY_REASONING,
                        tools=spec.tool_parser == HARMONY_TOOLS, state=state)


def template_stage(
    spec: ParserSpec, request: ParseRequest, state: dict[str, Any] | None
) -> ResponseTemplateStage | None:
    """hf/beam: one stage for both passes, as harmony's (response_template.py)."""
    if spec.response_template is None:
        return None
    return ResponseTemplateStage(spec.response_template, request, reasoning=spec.reasoning_parser is not None,
                                 tools=spec.tool_parser is not None, decode=spec.decode, state=state)


WholeStage = HarmonyStage | CohereStage | ResponseTemplateStage


def whole_stage(spec: ParserSpec, request: ParseRequest, state: dict[str, Any] | None) -> WholeStage | None:
    """The one stage for both passes where the parser is one (harmony's,
    Cohere's, hf/beam's); None for a reasoning and a tool pass."""
    stage = harmony_stage(spec, state)
    return stage if stage is not None else template_stage(spec, request, state)


def reasoning_stage(
    spec: ParserSpec,
    request: ParseRequest,
    state: dict[str, Any] | None,
    engines: Engines,
) -> ReasoningStage | None:
    if engines.reasoning is not None:
        return engines.reasoning.stage(request, state)
    if spec.reasoning_parser == R1 or spec.reasoning_parser in R1_ALIASES:
        return R1ReasoningStage(state)
    if spec.reasoning_parser in (DEEPSEEK_V3, HOLO2, POOLSIDE_V1):  # poolside_v1: deepseek_v3's (poolside_v1.py)
        return deepseek_v3_reasoning(request.chat_template_kwargs, state, holo2=spec.reasoning_parser == HOLO2)
    if spec.reasoning_parser == K2_HORIZON:
        return K2HorizonReasoningStage(request.chat_template_kwargs, state)
    if spec.reasoning_parser == KIMI_K3:
        return KimiK3ReasoningStage(request, state)
    if spec.reasoning_parser in MUSE_NAMES:
        return MuseReasoningStage(MUSE_NAMES[spec.reasoning_parser], state)
    if spec.reasoning_parser == OLMO3:
        return Olmo3ReasoningStage(state)
    if spec.reasoning_parser == MINIMAX_M3:
        return MiniMaxM3ReasoningStage(request.chat_template_kwargs.get("thinking_mode") == "enabled", state)
    if spec.reasoning_parser == ERNIE45:
        return Ernie45ReasoningStage(state)
    if spec.reasoning_parser == STEP3:
        return R1ReasoningStage(state or R1ReasoningStage.INSIDE)
    if spec.reasoning_parser == APPEND_THINK:
        return AppendThinkStage(state)
    if spec.reasoning_parser == GRANITE:
        return GraniteReasoningStage(state)
    if spec.reasoning_parser == A13B:
        return A13BReasoningStage(state)
    if spec.reasoning_parser in (HY_V3, HY_V4):
        return hy_reasoning(spec.reasoning_parser, request.chat_template_kwargs, state)
    return None


def tool_stage(
    spec: ParserSpec,
    request: ParseRequest,
    state: dict[str, Any] | None,
    engines: Engines,
    whole: bool,
) -> ToolStage | None:
    """The stage for ``DelegatingParser._extract_tool_calls``' branch."""
    name = spec.tool_parser
    if name is None:
        return None
    if request.forces_tool_calls and _supports_required_and_named(name):
        return ForcedToolStage(request.named_tool, state)  # the content is the forced JSON (forced.py)
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
    if name in PYTHONIC_PARSERS and not none:
        return PythonicToolStage(name == LLAMA4_PYTHONIC, state)
    if name == PHI4_MINI_JSON and not none:
        return Phi4MiniToolStage(state)
    if name in HELD_TOOLS:
        return HeldToolStage(HELD_TOOLS[name], request.tools, whole, state)
    if engines.tools is not None:
        suppress = none and bool(request.tools)
        return engines.tools.stage(request, state, suppress=suppress, legacy=not spec.parses_tool_content,
                                   whole=whole, auto=not none)
    if none:
        return None
    if name == HERMES or name in HERMES_ALIASES:
        return HermesToolStage(state)
    if name in (DEEPSEEK_V3, DEEPSEEK_V31):
        return DeepSeekV3ToolStage(name, state)
    if name in HERMES_RESPELLED:
        start, end = HERMES_RESPELLED[name]
        return HermesToolStage(state, start=start, end=end)
    if name in MUSE_NAMES:
        return MuseToolStage(MUSE_NAMES[name], request, state)
    if name == GIGACHAT3:
        return GigaChat3ToolStage(state)
    if name == FUNCTIONGEMMA:
        return FunctionGemmaToolStage(whole=whole, state=state)
    if name == ERNIE45:
        return Ernie45ToolStage(state)
    if name == STEP3_TOOLS:
        return Step3ToolStage(request.tools, whole=whole, state=state)
    if name == POOLSIDE_V1:
        return PoolsideV1ToolStage(request.tools, state)
    return None


def _supports_required_and_named(name: str) -> bool:
    """vLLM's ``ToolParser.supports_required_and_named`` (forced.py): an
    engine family's flag, or a legacy parser's."""
    family = tool_family(name)
    held = HELD_TOOLS.get(name)
    return name in (*PYTHONIC_PARSERS, PHI4_MINI_JSON, GIGACHAT3, STEP3_TOOLS, ERNIE45, FUNCTIONGEMMA) or (
        family is not None and family.supports_required_and_named
    ) or (held is not None and held.supports_required_and_named)
