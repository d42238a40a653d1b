"""Streaming derender (`"stream": true` bodies on the same two paths).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, Raw, Struct, UnsetType

from .requests import ChatOptions, CompletionOptions, GenerateChoice, UsageInfo
from .responses import ChatLogProbs, CompletionLogProbs, Usage
from .types import TokenId, null

# ======================================================= streaming derender
# `"stream": true` bodies on the same two paths (vLLM 0.33's
# Derender*StreamRequest / *StreamResponse). derender_queue/core/stream.py
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
    metrics: Raw = msgspec.field(default_factory=null)


MAX_STATE_INT = 2**53 - 1
"""The largest integer a carried state may hold (JSON's largest exact
integer in most clients): counts and offsets of one generation stay far
below it, and so do sums of them, which never overflow the state's msgpack
encoding (a vLLM-form offset near 2**64 did: a 500)."""
StateInt = Annotated[int, Meta(ge=0, le=MAX_STATE_INT)]


class StreamStateIn(Struct, kw_only=True):
    """A carried `stream_state`: ours (`opaque`, signed) or vLLM's own plain
    `DerenderStreamState`, whose fields and defaults follow: 0.33 carries its
    window as token strings (`prev_tokens`), 0.34 as ids (`prev_token_ids`)."""

    opaque: str | None = None
    prev_tokens: list[str] = msgspec.field(default_factory=list)
    prev_token_ids: list[StateInt] = msgspec.field(default_factory=list)
    prefix_offset: StateInt = 0
    read_offset: StateInt = 0
    role_sent: bool = False
    logprob_context_token_ids: Annotated[list[StateInt], Meta(max_length=4)] = msgspec.field(default_factory=list)
    logprob_text_offset: StateInt = 0
    output_token_ids: list[StateInt] = msgspec.field(default_factory=list)
    output_chunk_lens: list[Annotated[int, Meta(gt=0, le=MAX_STATE_INT)]] = msgspec.field(default_factory=list)
    tools_streamed: bool = False
    last_tool_call_ids: list[str] = msgspec.field(default_factory=list)


class StreamStateOut(Struct):
    """What we hand back: opaque to clients, signed, bound to the request;
    beside it, for a stream vLLM began, vLLM's own fields as the model's
    release writes them (derender_queue/core/vllm_state.py), else none."""

    opaque: str
    prev_token_ids: list[int] | UnsetType = UNSET
    prev_tokens: list[str] | UnsetType = UNSET
    prefix_offset: int | UnsetType = UNSET
    read_offset: int | UnsetType = UNSET
    role_sent: bool | UnsetType = UNSET
    logprob_context_token_ids: list[int] | UnsetType = UNSET
    logprob_text_offset: int | UnsetType = UNSET
    output_token_ids: list[int] | UnsetType = UNSET
    output_chunk_lens: list[int] | UnsetType = UNSET
    tools_streamed: bool | UnsetType = UNSET
    last_tool_call_ids: list[str] | UnsetType = UNSET


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
    metrics: Raw = msgspec.field(default_factory=null)
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
    metrics: Raw = msgspec.field(default_factory=null)
    kv_transfer_params: None = None


class DerenderChatStreamResponse(Struct):
    chunk: ChatCompletionChunk
    stream_state: StreamStateOut


class DerenderCompletionStreamResponse(Struct):
    chunk: CompletionChunk
    stream_state: StreamStateOut
