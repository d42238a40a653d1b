"""vLLM's derender request bodies: the generate stage's response plus request options.

Fields the derender does not read are passed over (unknown keys are ignored);
pass-through payloads (`metrics`, `kv_transfer_params`, ...) stay raw JSON.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from .types import TokenId, null

# ---------------------------------------------------------------- requests


# Per-token structs are created by the hundred thousand: `gc=False` keeps them
# out of the cyclic collector (they hold only scalars and acyclic lists).


class GenerateLogProb(Struct, kw_only=True, gc=False):
    """One candidate. 0.33 sends `token_id`; earlier vLLM sent
    `token: "token_id:N"` (with `bytes: null`), which we also accept."""

    token_id: TokenId | None = None
    token: str | None = None
    logprob: float
    rank: int | None = None


class GenerateLogProbsContent(GenerateLogProb, kw_only=True, gc=False):
    """The sampled token at one position and its candidates (sampled first)."""

    top_logprobs: list[GenerateLogProb] | None = None


class GenerateLogProbs(Struct, kw_only=True):
    content: list[GenerateLogProbsContent] | None = None


class GenerateChoice(Struct, kw_only=True):
    index: int
    token_ids: list[TokenId] | None = None
    logprobs: GenerateLogProbs | None = None
    finish_reason: str | None = "stop"
    stop_reason: int | str | None = None


class UsageInfo(Struct, kw_only=True):
    prompt_tokens: int | None = 0
    total_tokens: int | None = 0
    completion_tokens: int | None = 0


class SpeculativeDecodingMetrics(Struct, kw_only=True):
    mean_acceptance_length: float
    draft_acceptance_rate: float
    acceptance_histogram: list[int]
    num_spec_steps: int
    num_accepted_draft_tokens: int
    num_draft_tokens: int
    num_spec_tokens: int
    per_step_accepted: list[int] | None = None
    per_step_drafted: list[int] | None = None


class PerRequestMetrics(Struct, kw_only=True):
    """vLLM's metrics; passed through, unknown keys kept (as vLLM does)."""

    time_to_first_token_ms: float | None = None
    generation_time_ms: float | None = None
    queue_time_ms: float | None = None
    mean_itl_ms: float | None = None
    tokens_per_second: float | None = None
    speculative_decoding: SpeculativeDecodingMetrics | None = None


class PromptLogprob(Struct, kw_only=True):
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


class GenerateResponse(Struct, kw_only=True):
    """A generate stage's `output_mode="tokens"` response."""

    request_id: str | None = None
    model: str | None = None
    created: int | None = None
    output_mode: Literal["tokens"] = "tokens"
    choices: list[GenerateChoice]
    usage: UsageInfo | None = None
    prompt_token_ids: list[TokenId] | None = None
    prompt_logprobs: Raw = msgspec.field(default_factory=null)
    """`[{token_id: {logprob, rank, decoded_token}} | null]`, checked lazily."""
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: dict[str, Any] | None = None
    metrics: Raw = msgspec.field(default_factory=null)
    """A `PerRequestMetrics` object, checked lazily."""


class FunctionName(Struct):
    name: str


class NamedToolChoice(Struct, kw_only=True):
    type: str = "function"
    function: FunctionName


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


class ChatOptions(Struct, kw_only=True):
    """The subset of the original ChatCompletionRequest that derender reads."""

    logprobs: bool | None = False
    top_logprobs: int | None = 0
    logprob_token_ids: list[int] | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    min_tokens: int = 0
    skip_special_tokens: bool | None = None
    spaces_between_special_tokens: bool = True
    return_token_ids: bool | None = None
    return_tokens_as_token_ids: bool | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: ToolChoice | UnsetType | None = UNSET
    """Unset: "auto" when `tools` are given, else "none" (vLLM's default)."""
    parallel_tool_calls: bool | None = True
    include_reasoning: bool = True
    chat_template_kwargs: dict[str, Any] | None = None
    reasoning_effort: str | None = None
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    documents: list[dict[str, str]] | None = None
    token_string_form: Literal["vllm", "openai"] | None = None
    """Ours: how logprob `token` strings are spelled (model default if unset)."""


class CompletionOptions(Struct, kw_only=True):
    """The subset of the original CompletionRequest that derender reads."""

    logprobs: int | None = None
    logprob_token_ids: list[int] | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    min_tokens: int = 0
    skip_special_tokens: bool | None = None
    spaces_between_special_tokens: bool = True
    return_token_ids: bool | None = None
    return_tokens_as_token_ids: bool | None = None
    token_string_form: Literal["vllm", "openai"] | None = None


class DerenderChatRequest(Struct, kw_only=True):
    """Body of `POST /v1/chat/completions/derender`."""

    stream: Literal[False] = False
    model: str | None = None
    generate_response: GenerateResponse
    prompt_tokens: int | None = None
    prompt_token_ids: list[TokenId] | None = None
    chat_request: ChatOptions | None = None


class DerenderCompletionRequest(Struct, kw_only=True):
    """Body of `POST /v1/completions/derender`."""

    stream: Literal[False] = False
    model: str | None = None
    generate_responses: list[GenerateResponse]
    prompt_tokens: list[int] | None = None
    prompt_token_ids: list[list[TokenId] | None] | None = None
    completion_request: CompletionOptions | None = None
