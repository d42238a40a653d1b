"""The derender request/response contract, shared by the API, workers and producers.

Bodies are vLLM 0.33's `/v1/chat/completions/derender` and
`/v1/completions/derender` shapes. Types are msgspec Structs: decoding a 5 MB
top-20 body into them is several times cheaper than pydantic models, and the
same types give the OpenAPI schemas. This module imports nothing heavy.

Fields the derender does not read are passed over (unknown keys are ignored);
pass-through payloads (`metrics`, `kv_transfer_params`, ...) stay raw JSON.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Raw, Struct, UnsetType

TokenId = Annotated[int, Meta(ge=0)]
NULL = Raw(b"null")
"""Pass-through JSON values are `Raw` (any JSON, null included), never re-parsed."""


def _null() -> Raw:
    return NULL


def is_null(raw: Raw) -> bool:
    return bytes(raw) == b"null"

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
    prompt_logprobs: Raw = msgspec.field(default_factory=_null)
    """`[{token_id: {logprob, rank, decoded_token}} | null]`, checked lazily."""
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: dict[str, Any] | None = None
    metrics: Raw = msgspec.field(default_factory=_null)
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
    tool_choice: ToolChoice | None | UnsetType = UNSET
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


# --------------------------------------------------------------- responses


class LogProbCandidate(Struct, gc=False):
    token: str
    logprob: float
    bytes: Raw | list[int] | None
    """Pre-encoded per vocabulary id (a `Raw` JSON array) on the hot path."""


class LogProbEntry(Struct, gc=False):
    token: str
    logprob: float
    bytes: Raw | list[int] | None
    top_logprobs: list[LogProbCandidate]


class ChatLogProbs(Struct):
    content: list[LogProbEntry] | None


class ToolCallFunction(Struct):
    name: str
    arguments: str


class ToolCall(Struct):
    id: str
    type: str
    function: ToolCallFunction


class ChatMessage(Struct):
    role: str
    content: str | None
    refusal: None = None
    annotations: None = None
    audio: None = None
    function_call: None = None
    tool_calls: list[ToolCall] | UnsetType = UNSET
    """Left out when empty, as vLLM does."""
    reasoning: str | None = None


class ChatChoice(Struct):
    index: int
    message: ChatMessage
    logprobs: ChatLogProbs | None
    finish_reason: str | None
    stop_reason: int | str | None
    token_ids: list[int] | None
    routed_experts: None = None
    weight_versions: None = None


class Usage(Struct):
    prompt_tokens: int
    total_tokens: int
    completion_tokens: int
    prompt_tokens_details: None = None
    completion_tokens_details: None = None


class ChatCompletionResponse(Struct, kw_only=True):
    """Field order follows vLLM's, so responses diff cleanly against it."""

    id: str
    object: str = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    service_tier: None = None
    system_fingerprint: None = None
    usage: Usage
    prompt_logprobs: Raw = msgspec.field(default_factory=_null)
    prompt_token_ids: list[int] | None = None
    prompt_text: None = None
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: None = None
    metrics: Raw = msgspec.field(default_factory=_null)


class CompletionLogProbs(Struct):
    text_offset: list[int]
    token_logprobs: list[float | None]
    tokens: list[str]
    top_logprobs: list[dict[str, float] | None]


class CompletionChoice(Struct):
    index: int
    text: str
    logprobs: CompletionLogProbs | None
    finish_reason: str | None
    stop_reason: int | str | None
    token_ids: list[int] | None
    prompt_logprobs: None = None
    prompt_token_ids: list[int] | None = None
    routed_experts: None = None
    weight_versions: None = None


class CompletionResponse(Struct, kw_only=True):
    id: str
    object: str = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    service_tier: None = None
    system_fingerprint: None = None
    usage: Usage
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: None = None
    metrics: Raw = msgspec.field(default_factory=_null)


class ErrorInfo(Struct):
    message: str
    type: str
    param: str | None
    code: int


class ErrorResponse(Struct):
    """vLLM's error shape: `{"error": {"message", "type", "param", "code"}}`."""

    error: ErrorInfo


_ERROR_TYPES = {400: "BadRequestError", 404: "NotFoundError", 413: "BadRequestError"}


def error_body(status: int, message: str, param: str | None = None) -> bytes:
    """Encode an error the way vLLM's `create_error_response` shapes it."""
    kind = _ERROR_TYPES.get(status, "InternalServerError" if status >= 500 else "BadRequestError")
    return msgspec.json.encode(ErrorResponse(ErrorInfo(message, kind, param, status)))


# ======================================================= streaming derender
# `"stream": true` bodies on the same two paths (vLLM 0.33's
# Derender*StreamRequest / *StreamResponse). worker/derender/stream.py
# serves them; field order and nulls follow vLLM's model_dump.


class GenerateStreamChoice(GenerateChoice, kw_only=True):
    """One choice of a generate stage's SSE chunk (`finish_reason` only on the last)."""

    finish_reason: str | None = None


class GenerateStreamChunk(Struct, kw_only=True):
    """One `output_mode="tokens"` SSE chunk of `/inference/v1/generate`."""

    request_id: str | None = None
    output_mode: Literal["tokens"] = "tokens"
    choices: list[GenerateStreamChoice]
    usage: UsageInfo | None = None
    prompt_token_ids: list[TokenId] | None = None
    metrics: Raw = msgspec.field(default_factory=_null)


NonNegative = Annotated[int, Meta(ge=0)]


class StreamStateIn(Struct, kw_only=True):
    """A carried `stream_state`: ours (`opaque`, signed) or vLLM 0.33's own
    plain `DerenderStreamState`, whose fields and defaults follow."""

    opaque: str | None = None
    prev_tokens: list[str] = msgspec.field(default_factory=list)
    prefix_offset: NonNegative = 0
    read_offset: NonNegative = 0
    role_sent: bool = False
    logprob_context_token_ids: Annotated[list[int], Meta(max_length=4)] = msgspec.field(default_factory=list)
    logprob_text_offset: NonNegative = 0
    output_token_ids: list[TokenId] = msgspec.field(default_factory=list)
    output_chunk_lens: list[Annotated[int, Meta(gt=0)]] = msgspec.field(default_factory=list)
    tools_streamed: bool = False
    last_tool_call_ids: list[str] = msgspec.field(default_factory=list)


class StreamStateOut(Struct):
    """What we hand back: opaque to clients, signed, bound to the request."""

    opaque: str


class DerenderChatStreamRequest(Struct, kw_only=True):
    """`POST /v1/chat/completions/derender` with `"stream": true`: one chunk."""

    stream: Literal[True]
    model: str | None = None
    generate_chunk: GenerateStreamChunk
    stream_state: StreamStateIn | None = None
    prompt_tokens: int | None = None
    prompt_token_ids: list[TokenId] | None = None
    chat_request: ChatOptions | None = None


class DerenderCompletionStreamRequest(Struct, kw_only=True):
    """`POST /v1/completions/derender` with `"stream": true`: one chunk."""

    stream: Literal[True]
    model: str | None = None
    generate_chunk: GenerateStreamChunk
    stream_state: StreamStateIn | None = None
    prompt_tokens: int | None = None
    prompt_token_ids: list[TokenId] | None = None
    completion_request: CompletionOptions | None = None


class DeltaFunctionCall(Struct):
    name: str | None
    arguments: str | None


class DeltaToolCall(Struct):
    """A tool call fragment: the first one of a call has `id` and the name."""

    id: str | None
    type: Literal["function"] | None
    index: int
    function: DeltaFunctionCall | None


class DeltaMessage(Struct):
    role: str | None = None
    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[DeltaToolCall] | UnsetType = UNSET
    """Left out when empty, as vLLM's serializer does."""


class ChatStreamChoice(Struct):
    index: int
    delta: DeltaMessage
    logprobs: ChatLogProbs | None
    finish_reason: str | None
    stop_reason: int | str | None
    token_ids: list[int] | None
    weight_versions: None = None


class ChatCompletionChunk(Struct, kw_only=True):
    """vLLM's `ChatCompletionStreamResponse`."""

    id: str
    object: str = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChatStreamChoice]
    usage: Usage | None = None
    system_fingerprint: None = None
    prompt_token_ids: list[int] | None = None
    prompt_text: None = None
    metrics: Raw = msgspec.field(default_factory=_null)
    kv_transfer_params: None = None


class CompletionStreamChoice(Struct):
    index: int
    text: str
    logprobs: CompletionLogProbs | None
    finish_reason: str | None
    stop_reason: int | str | None
    prompt_token_ids: list[int] | None
    token_ids: list[int] | None
    weight_versions: None = None


class CompletionChunk(Struct, kw_only=True):
    """vLLM's `CompletionStreamResponse`."""

    id: str
    object: str = "text_completion"
    created: int
    model: str
    choices: list[CompletionStreamChoice]
    usage: Usage | None = None
    system_fingerprint: None = None
    metrics: Raw = msgspec.field(default_factory=_null)
    kv_transfer_params: None = None


class DerenderChatStreamResponse(Struct):
    chunk: ChatCompletionChunk
    stream_state: StreamStateOut


class DerenderCompletionStreamResponse(Struct):
    chunk: CompletionChunk
    stream_state: StreamStateOut
