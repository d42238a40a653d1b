"""vLLM's error shape, which every 4xx/5xx answer uses.
"""

from __future__ import annotations

import msgspec
from msgspec import Struct


class ErrorInfo(Struct):
    message: str
    type: str
    param: str | None
    code: int


class ErrorResponse(Struct):
    """vLLM's error shape: `{"error": {"message", "type", "param", "code"}}`."""

    error: ErrorInfo


_ERROR_TYPES = {400: "BadRequestError", 404: "NotFoundError", 409: "ConflictError", 413: "BadRequestError"}
"""vLLM's typed errors are named as the OpenAI SDK names its exceptions; vLLM
has no 409, so ours takes the SDK's name for one (`openai.ConflictError`)."""


def error_info(status: int, message: str, param: str | None = None, kind: str | None = None) -> ErrorInfo:
    """The inside of vLLM's error shape (its `type` follows from the status
    unless `kind` names it)."""
    kind = kind or _ERROR_TYPES.get(status, "InternalServerError" if status >= 500 else "BadRequestError")
    return ErrorInfo(message, kind, param, status)


def error_body(status: int, message: str, param: str | None = None, kind: str | None = None) -> bytes:
    """Encode an error the way vLLM's `create_error_response` shapes it."""
    return msgspec.json.encode(ErrorResponse(error_info(status, message, param, kind)))
