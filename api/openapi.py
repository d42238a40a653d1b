"""The OpenAPI document, generated once from the contract's msgspec types."""

from __future__ import annotations

from typing import Any

import msgspec

from derender_queue.contract.error_shape import ErrorResponse
from derender_queue.contract.requests import DerenderChatRequest, DerenderCompletionRequest
from derender_queue.contract.responses import ChatCompletionResponse, CompletionResponse
from derender_queue.contract.step_requests import DerenderStepRequest, StepItemError
from derender_queue.contract.stream_requests import (
    DerenderChatStreamRequest,
    DerenderChatStreamResponse,
    DerenderCompletionStreamRequest,
    DerenderCompletionStreamResponse,
)

from .status_data import Status

_TYPES = (
    DerenderChatRequest, DerenderCompletionRequest, ChatCompletionResponse, CompletionResponse, ErrorResponse,
    DerenderChatStreamRequest, DerenderCompletionStreamRequest,
    DerenderChatStreamResponse, DerenderCompletionStreamResponse, DerenderStepRequest, StepItemError, Status,
)


def _ref(t: type) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{t.__name__}"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


_ERRORS = {str(code): {"description": why, **_json(_ref(ErrorResponse))} for code, why in (
    (400, "invalid request"), (404, "unknown model"), (413, "body too large"),
    (503, "Redis unavailable (Retry-After)"), (504, "no result within the wait timeout"),
)}


def _derender_op(summary: str, request: type, response: type, stream_request: type,
                 stream_response: type) -> dict[str, Any]:
    """One path, two bodies: `"stream": true` is one chunk of a streaming derender."""
    return {"post": {
        "summary": summary,
        "requestBody": {"required": True, **_json({"oneOf": [_ref(request), _ref(stream_request)]})},
        "responses": {"200": {"description": "derendered (a chunk and its stream_state when streaming)",
                              **_json({"oneOf": [_ref(response), _ref(stream_response)]})}, **_ERRORS},
    }}


def _step_op() -> dict[str, Any]:
    """Items are streaming chunk bodies of the step's endpoint; each result is
    that chunk's answer or its own error."""
    result = {"oneOf": [_ref(DerenderChatStreamResponse), _ref(DerenderCompletionStreamResponse),
                        _ref(StepItemError)]}
    answer = {"type": "object", "required": ["results"],
              "properties": {"results": {"type": "array", "items": result}}}
    return {"post": {
        "summary": "Engine step: many streams' next chunks in one job, one result per item in item order",
        "requestBody": {"required": True, **_json(_ref(DerenderStepRequest))},
        "responses": {"200": {"description": "per item: its chunk and stream_state, or its error and status",
                              **_json(answer)}, **_ERRORS},
    }}


def openapi_document() -> bytes:
    _, components = msgspec.json.schema_components(_TYPES, ref_template="#/components/schemas/{name}")
    job = {"type": "object", "properties": {"id": {"type": "string"}, "status": {"type": "string"}}}
    paths = {
        "/v1/chat/completions/derender": _derender_op(
            "Chat derender (vLLM 0.33 body)", DerenderChatRequest, ChatCompletionResponse,
            DerenderChatStreamRequest, DerenderChatStreamResponse),
        "/v1/completions/derender": _derender_op(
            "Completion derender (vLLM 0.33 body)", DerenderCompletionRequest, CompletionResponse,
            DerenderCompletionStreamRequest, DerenderCompletionStreamResponse),
        "/v1/derender/step": _step_op(),
        "/v1/chat/completions/derender/sse": {"post": {
            "summary": "Streaming chat derender over SSE: a first line of shared fields, then generate chunks",
            "responses": {"200": {"description": "text/event-stream of chat.completion.chunk"}}}},
        "/v1/completions/derender/sse": {"post": {
            "summary": "Streaming completion derender over SSE",
            "responses": {"200": {"description": "text/event-stream of text_completion chunks"}}}},
        "/v1/jobs": {"post": {
            "summary": "Submit a derender job; poll GET /v1/jobs/{id}",
            "parameters": [
                {"name": "endpoint", "in": "query",
                 "schema": {"enum": ["chat", "completion", "step"], "default": "chat"}},
                {"name": "Idempotency-Key", "in": "header", "schema": {"type": "string"}},
            ],
            "requestBody": {"required": True, **_json({"oneOf": [
                _ref(DerenderChatRequest), _ref(DerenderCompletionRequest), _ref(DerenderStepRequest)]})},
            "responses": {"202": {"description": "accepted", **_json(job)}, "409": {
                "description": "Idempotency-Key reused with another body", **_json(_ref(ErrorResponse))}},
        }},
        "/v1/jobs/{job_id}": {"get": {
            "summary": "A job's state: pending, done (with result), error (with error_response), unknown",
            "parameters": [{"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "pending or finished", **_json(job)},
                          "404": {"description": "unknown (or not yours)", **_json(job)}},
        }},
        "/v1/models": {"get": {"summary": "Models served by live workers",
                               "responses": {"200": {"description": "OpenAI model list"}}}},
        "/health": {"get": {"summary": "Process alive (no Redis call)", "responses": {"200": {"description": "ok"}}}},
        "/ready": {"get": {"summary": "Redis reachable; live workers and models", "responses": {
            "200": {"description": "ready"}, "503": {"description": "Redis unreachable"}}}},
        "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {"200": {"description": "text format"}}}},
        "/status": {"get": {"summary": "Status page (HTML, refreshes itself): workers, queues, last minute, errors",
                            "responses": {"200": {"description": "text/html"}}}},
        "/status.json": {"get": {"summary": "The status page's numbers",
                                 "responses": {"200": {"description": "snapshot", **_json(_ref(Status))}}}},
    }
    doc = {"openapi": "3.1.0", "info": {"title": "derender-queue", "version": "1"},
           "paths": paths, "components": {"schemas": components}}
    return msgspec.json.encode(doc)
