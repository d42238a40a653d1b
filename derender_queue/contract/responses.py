"""vLLM's derender responses: `chat.completion` and `text_completion`.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from .types import null

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
    annotations: UnsetType | None = None
    """Null in 0.33, left out in 0.34 (compat.Profile.null_extras)."""
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
    prompt_tokens_details: UnsetType | None = None
    """Null in 0.33, left out in 0.34 (compat.Profile.null_extras)."""
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
    prompt_logprobs: Raw = msgspec.field(default_factory=null)
    prompt_token_ids: list[int] | None = None
    prompt_text: None = None
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: None = None
    metrics: Raw = msgspec.field(default_factory=null)


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
    prompt_logprobs: Raw = msgspec.field(default_factory=null)
    """Always null in 0.33; the response's, decoded, in 0.34."""
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
    metrics: Raw = msgspec.field(default_factory=null)
