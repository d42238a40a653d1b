"""What the API checks before enqueueing: only what is cheap.

It never parses a whole request: the body is read with a size cap (413 before
reading past it), must look like a JSON object, and its top-level `model` is
found by a head match when it comes first (vLLM's and our clients put it
there); only otherwise does msgspec scan the body for it (~1 ms per MB).
The worker validates everything else.
"""

from __future__ import annotations

import json
import re

import msgspec
from starlette.requests import Request

from derender_queue.errors import DerenderError, bad_request

_HEAD = re.compile(
    rb'\s*\{\s*(?:"stream"\s*:\s*(?:true|false)\s*,\s*)?"model"\s*:\s*(null|"(?:[^"\\]|\\.)*")\s*[,}]'
)


class _ModelOnly(msgspec.Struct):
    model: str | None = None


_model_decoder = msgspec.json.Decoder(_ModelOnly)


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise DerenderError(f"request body exceeds {limit} bytes", status=413)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise DerenderError(f"request body exceeds {limit} bytes", status=413)
        chunks.append(chunk)
    return b"".join(chunks)


def requested_model(body: bytes) -> str | None:
    """The body's top-level `model`, after checking it is a JSON object."""
    stripped = body.strip()
    if not (stripped.startswith(b"{") and stripped.endswith(b"}")):
        raise bad_request("request body must be a JSON object")
    head = _HEAD.match(body, 0, 4096)
    if head is not None:
        model: str | None = msgspec.json.decode(head.group(1))
        return model
    try:
        return _model_decoder.decode(body).model
    except msgspec.ValidationError as exc:
        raise bad_request(f"Invalid request: {exc}") from None
    except msgspec.DecodeError as exc:
        if b"Infinity" not in body and b"NaN" not in body:
            raise bad_request(f"Invalid JSON body: {exc}") from None
    # Python's JSON constants (-Infinity from a Python generate stage): rare
    # and slow, but the model must be right, so read it the stdlib's way.
    try:
        data = json.loads(body, parse_constant=float)
    except (ValueError, RecursionError) as exc:
        raise bad_request(f"Invalid JSON body: {exc}") from None
    model = data.get("model") if isinstance(data, dict) else None
    if model is not None and not isinstance(model, str):
        raise bad_request("Invalid request: `model` must be a string", param="model")
    return model
