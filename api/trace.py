"""Request tracing headers that travel with a job into the worker's logs."""

from __future__ import annotations

from starlette.requests import Request

from derender_queue.wire.keys import random_id

MAX_TRACE_VALUE = 256
"""Longer values are not carried: they would bloat every job's envelope line,
which must stay short enough to read with its first bytes (wire/envelope.py
`ENVELOPE_PEEK_BYTES`)."""


def request_trace(request: Request) -> dict[str, str]:
    """`X-Request-Id` (ours when the client sent none, or one too long) and W3C
    `traceparent`: they travel with the job into the worker's logs and come
    back. The same dict for every call about one request."""
    trace: dict[str, str] | None = getattr(request.state, "trace", None)
    if trace is None:
        trace = {k: v for k in ("x-request-id", "traceparent")
                 if (v := request.headers.get(k)) is not None and len(v) <= MAX_TRACE_VALUE}
        trace.setdefault("x-request-id", random_id())
        request.state.trace = trace
    return trace
