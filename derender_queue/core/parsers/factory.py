"""Parser selection (vLLM's ParserManager) and the non-streaming entry point."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from . import families  # noqa: F401  (registers the engine families)
from .append_think import NAME as APPEND_THINK
from .cohere_filter import NAMES as COHERE
from .deepseek_v3 import CALLS_BEGIN as V3_CALLS_BEGIN
from .deepseek_v3 import CALLS_END as V3_CALLS_END
from .deltas import DeltaAccumulator, ParsedMessage
from .engine import EngineReasoning, EngineTools, reasoning_family, tool_family
from .ernie45 import NAME as ERNIE45
from .functiongemma import NAME as FUNCTIONGEMMA
from .gigachat3 import NAME as GIGACHAT3
from .granite_reasoning import GRANITE as GRANITE_REASONING
from .harmony import REASONING_NAME as HARMONY_REASONING
from .harmony import TOOL_NAME as HARMONY_TOOLS
from .held_tools import HELD_TOOLS
from .hunyuan import A13B, HY_V3, HY_V4
from .hunyuan import CALLS_END as HY_CALLS_END
from .hunyuan import CALLS_START as HY_CALLS_START
from .k2_horizon import K2_HORIZON
from .kimi_k3 import KIMI_K3
from .minimax_m3_reasoning import NAME as MINIMAX_M3
from .muse import NAMES as MUSE_NAMES
from .newlines import NAME as MINICPMV
from .newlines import NewlineRecovery
from .olmo3 import NAME as OLMO3
from .phi4_mini import PHI4_MINI_JSON
from .pipeline import ChatParser
from .poolside_v1 import ASSISTANT as POOLSIDE_ASSISTANT
from .poolside_v1 import NAME as POOLSIDE_V1
from .r1 import END as R1_END
from .r1 import START as R1_START
from .request import ParseRequest
from .response_template_spec import NAMES as TEMPLATE_PARSERS
from .response_template_spec import check_combination, check_parsers
from .stages import (
    DEEPSEEK_V3,
    DEEPSEEK_V31,
    HERMES,
    HERMES_ALIASES,
    HERMES_RESPELLED,
    HOLO2,
    PYTHONIC_PARSERS,
    R1,
    R1_ALIASES,
    STEP3,
    Engines,
    ParserSpec,
)
from .step3_tools import NAME as STEP3_TOOLS

REASONING_PARSERS: tuple[str, ...] = (
    R1, DEEPSEEK_V3, HOLO2, K2_HORIZON, KIMI_K3, APPEND_THINK, HARMONY_REASONING, STEP3, ERNIE45, OLMO3, *R1_ALIASES,
    GRANITE_REASONING, POOLSIDE_V1, MINIMAX_M3, A13B, HY_V3, HY_V4, *MUSE_NAMES, *TEMPLATE_PARSERS,
    *COHERE)  # fmt: skip
TOOL_PARSERS: tuple[str, ...] = (
    HERMES, *HERMES_ALIASES, *HERMES_RESPELLED, DEEPSEEK_V3, DEEPSEEK_V31, K2_HORIZON, KIMI_K3, *PYTHONIC_PARSERS,
    HARMONY_TOOLS, GIGACHAT3, STEP3_TOOLS, ERNIE45, PHI4_MINI_JSON, POOLSIDE_V1, *HELD_TOOLS, FUNCTIONGEMMA, A13B,
    HY_V3, HY_V4, *MUSE_NAMES, *TEMPLATE_PARSERS, *COHERE)  # fmt: skip


class ParserFactory:
    """Builds one ``ChatParser`` per choice for a configured server."""

    def __init__(self, spec: ParserSpec, engines: Engines | None = None) -> None:
        self.spec = spec
        self._engines = engines

    def start_state(self, request: ParseRequest, prompt_token_ids: Sequence[int] | None) -> dict[str, Any] | None:
        """A stream's first parser state when the prompt ids change it (an
        engine family whose prompt may close reasoning), else None.  Streams
        read the prompt once; ``to_state()`` carries what it decided."""
        if prompt_token_ids and self.spec.response_template is not None:  # hf/beam: the prompt's last turn
            return self(replace(request, prompt_token_ids=list(prompt_token_ids))).to_state()
        if not prompt_token_ids or self._engines is None or self._engines.reasoning is None:
            return None
        return self(replace(request, prompt_token_ids=list(prompt_token_ids))).to_state()

    def __call__(
        self, request: ParseRequest, *, state: dict[str, Any] | None = None, whole: bool = False
    ) -> ChatParser | NewlineRecovery:
        """A fresh parser, or one resumed from ``ChatParser.to_state()``;
        ``whole`` for a non-streaming parse (the output in one chunk)."""
        parser = ChatParser(self.spec, request, state, self._engines, whole)
        if MINICPMV in (self.spec.reasoning_parser, self.spec.tool_parser):
            return NewlineRecovery(parser, state)  # MiniCPMVUnifiedParser (newlines.py)
        return parser


def build_parser_factory(
    reasoning_parser: str | None,
    tool_parser: str | None,
    *,
    vocab: Mapping[str, int],
    enable_auto_tools: bool,
    special_tokens: Iterable[str] = (),
    encode: Callable[[str], list[int]] | None = None,
    response_template: Any = None,
    decode: Callable[[list[int]], str] | None = None,
) -> ParserFactory | None:
    """vLLM's ``ParserManager.get_parser``; None when no parser applies.

    ``special_tokens`` is the tokenizer's ``all_special_tokens`` (for DeepSeek
    V4: BOS and EOS text); an engine family drops their text from the output.
    A tool parser only exists with ``enable_auto_tools``, as in vLLM, so a
    reasoning-less server without it has no parser at all.
    ``encode`` is the tokenizer's (no special tokens added), for a family
    that compares token ids (``Family.for_encoder``: PLaMo 3).
    ``response_template`` (the tokenizer config's) and ``decode`` (of prompt
    ids, special tokens kept) serve ``hf`` and ``beam`` (response_template.py).
    """
    r_family, t_family = reasoning_family(reasoning_parser), tool_family(tool_parser)
    if reasoning_parser is not None and reasoning_parser not in REASONING_PARSERS and r_family is None:
        raise ValueError(f"unknown reasoning parser {reasoning_parser!r}")
    if tool_parser is not None and tool_parser not in TOOL_PARSERS and t_family is None:
        raise ValueError(f"unknown tool parser {tool_parser!r}")
    _check_harmony(reasoning_parser, tool_parser)
    if tool_parser in COHERE and reasoning_parser not in (None, *COHERE):
        # CohereCommandParser asserts its shim (the reasoning parser first) is Cohere's.
        raise ValueError(f"the {tool_parser} tool parser needs a Cohere Command reasoning parser or none, "
                         f"got {reasoning_parser!r}")
    if reasoning_parser == STEP3 and R1_END not in vocab:
        raise ValueError("Step3 reasoning parser could not locate think end token in the tokenizer!")
    if reasoning_parser == ERNIE45 and (R1_START not in vocab or R1_END not in vocab):
        raise ValueError("Ernie45ReasoningParser reasoning parser could not locate think start/end tokens in the "
                         "tokenizer!")
    if (reasoning_parser == R1 or reasoning_parser in R1_ALIASES) and (R1_START not in vocab or R1_END not in vocab):
        # vLLM refuses to start: BaseThinkingReasoningParser needs both ids.
        raise ValueError(
            "deepseek_r1 reasoning parser could not locate think start/end "
            "tokens in the tokenizer!"
        )
    if reasoning_parser == POOLSIDE_V1 and POOLSIDE_ASSISTANT not in vocab:
        raise ValueError(f"Tokenizer must contain {POOLSIDE_ASSISTANT!r} token")  # PoolsideV1ReasoningParser.__init__
    if reasoning_parser == HY_V3 and (R1_START not in vocab or R1_END not in vocab):
        # HYV3ReasoningParser is a BaseThinkingReasoningParser (hy_v4 checks per request, when thinking).
        raise ValueError("HYV3ReasoningParser reasoning parser could not locate think start/end tokens in the "
                         "tokenizer!")
    if tool_parser in (HY_V3, HY_V4) and (HY_CALLS_START not in vocab or HY_CALLS_END not in vocab):
        raise ValueError("HYV3/HYV4 Tool parser could not locate tool call start/end tokens in the tokenizer!")
    if tool_parser in (DEEPSEEK_V3, DEEPSEEK_V31) and (V3_CALLS_BEGIN not in vocab or V3_CALLS_END not in vocab):
        # DeepSeekV3ToolParser.__init__ needs both ids.
        raise ValueError("DeepSeek-V3 Tool parser could not locate tool call start/end tokens in the tokenizer!")
    spec = ParserSpec(
        reasoning_parser=reasoning_parser,
        tool_parser=tool_parser if enable_auto_tools else None,
        enable_auto_tools=enable_auto_tools,
    )
    if spec.reasoning_parser is None and spec.tool_parser is None:
        return None
    if check_combination(spec.reasoning_parser, spec.tool_parser):
        template = check_parsers(response_template, spec.reasoning_parser, spec.tool_parser)
        return ParserFactory(replace(spec, response_template=template, decode=decode))
    special_tokens = list(special_tokens)
    engines = Engines(
        EngineReasoning.build(r_family, vocab, special_tokens, encode) if r_family else None,
        EngineTools.build(t_family, special_tokens, skip_reasoning=reasoning_parser is None, vocab=vocab,
                          own_reasoning=r_family is not None and r_family.name == t_family.name, encode=encode)
        if t_family and spec.tool_parser
        else None,
    )
    has_engine = engines.reasoning is not None or engines.tools is not None
    return ParserFactory(spec, engines if has_engine else None)


def _check_harmony(reasoning_parser: str | None, tool_parser: str | None) -> None:
    """vLLM builds its HarmonyParser for a gpt-oss model, which refuses any
    other parser beside it (and the two names parse nothing elsewhere), so a
    harmony name with a non-harmony one is a configuration error here."""
    if reasoning_parser == HARMONY_REASONING and tool_parser not in (None, HARMONY_TOOLS):
        raise ValueError(f"Harmony requires GptOssToolParser, got tool parser {tool_parser!r}.")
    if tool_parser == HARMONY_TOOLS and reasoning_parser not in (None, HARMONY_REASONING):
        raise ValueError(f"Harmony requires GptOssReasoningParser, got reasoning parser {reasoning_parser!r}.")


def parse_message(
    factory: ParserFactory,
    request: ParseRequest,
    text: str,
    token_ids: Sequence[int],
    engine_finish_reason: str | None,
) -> ParsedMessage:
    """Non-streaming parse: vLLM's ``parse()`` + assembly + finish_reason."""
    parser = factory(request, whole=True)
    acc = DeltaAccumulator()
    acc.add(parser.feed(text, token_ids))
    acc.add(parser.finish())
    tool_calls = acc.tool_calls
    return ParsedMessage(
        reasoning=acc.reasoning,
        content=acc.content,
        tool_calls=tool_calls,
        finish_reason=resolve_finish_reason(
            engine_finish_reason, request, bool(tool_calls)
        ),
        hide_token_metadata=hides_token_metadata(factory, request),
    )


def resolve_finish_reason(
    engine_finish_reason: str | None, request: ParseRequest | None, tool_calls_made: bool
) -> str:
    """``tool_calls`` only for a natural stop with calls and no named tool."""
    finish_reason = engine_finish_reason or "stop"
    named = request is not None and request.named_tool is not None
    if tool_calls_made and finish_reason == "stop" and not named:
        return "tool_calls"
    return finish_reason


def hides_token_metadata(factory: ParserFactory | None, request: ParseRequest) -> bool:
    """vLLM hides logprobs and token ids when a parser is configured and
    reasoning is not returned (they would leak it)."""
    return factory is not None and not request.include_reasoning
