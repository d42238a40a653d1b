"""What the API checks before enqueueing: only what is cheap.

It never parses a whole request: the content type must be JSON (as vLLM
checks it), the body is read with a size cap (413 before reading past it),
within the in-flight byte budget (api/inflight.py) and an idle timeout
(408); then it must look like a JSON object and name a model
(`contract.model_name.requested_model`, which `derender batch` asks of
each line too, so both answer a bad body in the same words). The worker
validates everything else. Whatever the bytes, the answer is a 400, never a
500 (nesting, bad escapes, invalid UTF-8).
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request

from derender_queue.errors import DerenderError, bad_request

from .inflight import Ledger
from .memory import MMAP_THRESHOLD

UNSUPPORTED_MEDIA_TYPE = "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed"
"""vLLM 0.33's words (`validate_json_request`), as its goldens recorded them."""


class ClientGone(Exception):
    """The client disconnected before its body was read: normal, not an error."""


def require_json(request: Request) -> None:
    """vLLM's check, exactly: the media type before any `;`, lower-cased,
    must be `application/json`; a missing header is refused too."""
    media_type = request.headers.get("content-type", "").lower().split(";", 1)[0]
    if media_type != "application/json":
        raise bad_request(UNSUPPORTED_MEDIA_TYPE)


async def read_body(request: Request, limit: int, idle_s: float, ledger: Ledger, key: str) -> bytes:
    """The body, holding its bytes in `ledger` (a 503 beyond the budget).

    A declared length is admitted whole before anything is read; a chunked
    body chunk by chunk. A body under the mmap threshold is joined from
    uvicorn's pieces at the end: one copy, in heap pages reused from earlier
    requests. A larger one is copied into a buffer of its declared size as it
    arrives (mapped memory, handed back when freed: api/memory.py), so that a
    burst of them never holds the pieces and the whole body at once."""
    declared = request.headers.get("content-length")
    size = int(declared) if declared is not None and declared.isdigit() else None
    if size is not None and size > limit:
        raise DerenderError(f"request body exceeds {limit} bytes", status=413)
    if size is not None:
        ledger.take(size, key)
    buffer = bytearray(size if size is not None and size >= MMAP_THRESHOLD else 0)
    large, pieces, filled = len(buffer) > 0, [], 0
    while True:
        message = await _receive(request, idle_s)
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk, more = message.get("body", b""), message.get("more_body", False)
        if isinstance(chunk, bytes) and chunk:
            end = filled + len(chunk)
            if end > limit:
                raise DerenderError(f"request body exceeds {limit} bytes", status=413)
            if size is None:
                ledger.take(len(chunk), key)
            if not (filled or more):
                return chunk  # all of it in one piece, as small bodies come
            if large:
                buffer[filled:end] = chunk
            else:
                pieces.append(chunk)
            filled = end
        if not more:
            return bytes(memoryview(buffer)[:filled]) if large else b"".join(pieces)


async def _receive(request: Request, idle_s: float) -> dict[str, object]:
    try:
        return dict(await asyncio.wait_for(request.receive(), idle_s))
    except TimeoutError:
        raise idle_body(idle_s) from None


def idle_body(idle_s: float) -> DerenderError:
    """The 408 for a body that sent nothing for `idle_s` (DERENDER_BODY_IDLE_TIMEOUT_S)."""
    return DerenderError(f"no request body bytes received for {idle_s:g} s", status=408)


