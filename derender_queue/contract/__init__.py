"""The derender contract, shared by the API, workers and producers.

Bodies are vLLM's `/v1/chat/completions/derender` and
`/v1/completions/derender` shapes (0.33's and 0.34's are the same). Types are msgspec Structs: decoding a 5 MB
top-20 body into them is several times cheaper than pydantic models, and the
same types give the OpenAPI schemas. This package imports nothing heavy.

    types            token ids, raw pass-through JSON, the endpoint names
    requests         the generate stage's response and the request options
    responses        chat.completion and text_completion
    stream_requests  the `"stream": true` bodies and chunks
    step_requests    engine steps: many streams' chunks in one body
    model_name       the `model` a body names, read from its head (routing)
    error_shape      vLLM's error body
"""

from .error_shape import (
    ErrorInfo,
    ErrorResponse,
    error_body,
    error_info,
)
from .requests import (
    ChatOptions,
    CompletionOptions,
    DerenderChatRequest,
    DerenderCompletionRequest,
    FunctionName,
    GenerateChoice,
    GenerateLogProb,
    GenerateLogProbs,
    GenerateLogProbsContent,
    GenerateResponse,
    NamedToolChoice,
    PerRequestMetrics,
    PromptLogprob,
    SpeculativeDecodingMetrics,
    ToolChoice,
    UsageInfo,
)
from .responses import (
    ChatChoice,
    ChatCompletionResponse,
    ChatLogProbs,
    ChatMessage,
    CompletionChoice,
    CompletionLogProbs,
    CompletionResponse,
    LogProbCandidate,
    LogProbEntry,
    ToolCall,
    ToolCallFunction,
    Usage,
)
from .step_requests import STEP_MAX_ITEMS, DerenderStepRequest, StepItemError
from .stream_requests import (
    MAX_STATE_INT,
    ChatCompletionChunk,
    ChatStreamChoice,
    CompletionChunk,
    CompletionStreamChoice,
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    DerenderChatStreamRequest,
    DerenderChatStreamResponse,
    DerenderCompletionStreamRequest,
    DerenderCompletionStreamResponse,
    GenerateStreamChoice,
    GenerateStreamChunk,
    StreamStateIn,
    StreamStateOut,
)
from .types import (
    NULL,
    Endpoint,
    JobKind,
    TokenId,
    is_null,
    null,
)

__all__ = [
    "MAX_STATE_INT",
    "NULL",
    "STEP_MAX_ITEMS",
    "ChatChoice",
    "ChatCompletionChunk",
    "ChatCompletionResponse",
    "ChatLogProbs",
    "ChatMessage",
    "ChatOptions",
    "ChatStreamChoice",
    "CompletionChoice",
    "CompletionChunk",
    "CompletionLogProbs",
    "CompletionOptions",
    "CompletionResponse",
    "CompletionStreamChoice",
    "DeltaFunctionCall",
    "DeltaMessage",
    "DeltaToolCall",
    "DerenderChatRequest",
    "DerenderChatStreamRequest",
    "DerenderChatStreamResponse",
    "DerenderCompletionRequest",
    "DerenderCompletionStreamRequest",
    "DerenderCompletionStreamResponse",
    "DerenderStepRequest",
    "Endpoint",
    "ErrorInfo",
    "ErrorResponse",
    "FunctionName",
    "GenerateChoice",
    "GenerateLogProb",
    "GenerateLogProbs",
    "GenerateLogProbsContent",
    "GenerateResponse",
    "GenerateStreamChoice",
    "GenerateStreamChunk",
    "JobKind",
    "LogProbCandidate",
    "LogProbEntry",
    "NamedToolChoice",
    "PerRequestMetrics",
    "PromptLogprob",
    "SpeculativeDecodingMetrics",
    "StepItemError",
    "StreamStateIn",
    "StreamStateOut",
    "TokenId",
    "ToolCall",
    "ToolCallFunction",
    "ToolChoice",
    "Usage",
    "UsageInfo",
    "error_body",
    "error_info",
    "is_null",
    "null",
]
