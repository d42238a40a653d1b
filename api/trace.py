"""Request tracing headers that travel with a job into the worker's logs."""

from __future__ import annotations

from starlette.requests import Request

from derender_queue.wire.keys import new_job_id


def request_trace(request: Request) -> dict[str, str]:
    """`X-Request-Id` (ours when the client sent none) and W3C `traceparent`:
    they travel with the job into the worker's logs and come back."""
    trace = {k: request.headers[k] for k in ("x-request-id", "traceparent") if k in request.headers}
    trace.setdefault("x-request-id", new_job_id())
    return trace
