"""The wrapper every route goes through: metrics, the API-key check and the
mapping of errors to vLLM's error shape; and for the routes that enqueue
jobs, the record of their answers the status page shows (api/recent.py).

No exception leaves a route: a refusal (`DerenderError`) is its status, a
Redis failure of any exception type (wire/failures.py) a 503 with Retry-After,
a client that left mid-upload a 499 (one info line), anything else a 500 in
vLLM's shape, logged with the request id. (An exception escaping to uvicorn
would drop the keep-alive connection without saying so, and the client's next
request on it would fail.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from http import HTTPStatus

import msgspec
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from derender_queue.contract.error_shape import error_body
from derender_queue.errors import DerenderError
from derender_queue.logs import trace_fields
from derender_queue.wire.failures import redis_failure

from . import metrics
from .auth import principal
from .intake import ClientGone
from .recent import MAX_MESSAGE
from .state import api_state
from .trace import request_trace

JSON = "application/json"
Handler = Callable[[Request], Awaitable[Response]]
log = logging.getLogger("derender.api")


def error_response(exc: DerenderError) -> Response:
    headers = {"Retry-After": "1"} if exc.status in (429, 503) else None
    if exc.status == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    if exc.status == 408:  # the rest of the body may never come: do not wait for it
        headers = {"Connection": "close"}
    return Response(exc.body(), status_code=exc.status, media_type=JSON, headers=headers)


def unavailable_body(exc: Exception) -> bytes:
    """The 503 error for a Redis failure (a response, or an SSE error event)."""
    return error_body(503, f"Redis is unavailable, retry shortly ({type(exc).__name__})")


def instrumented(route: str, handler: Handler, *, public: bool = False) -> Handler:
    """Metrics, API-key check (unless `public`) and error mapping for a route."""

    async def endpoint(request: Request) -> Response:
        start = time.perf_counter()
        metrics.IN_FLIGHT.inc()
        try:
            response = await _answer(route, handler, request, public)
        finally:
            metrics.IN_FLIGHT.dec()
        metrics.REQUESTS.labels(route, str(response.status_code)).inc()
        metrics.LATENCY.labels(route).observe(time.perf_counter() - start)
        return response

    return endpoint


def observed(route: str, handler: Handler, *, timed: bool = True) -> Handler:
    """A route that enqueues jobs: `instrumented`, its error answers fed into
    its client's ring, and (`timed`: the synchronous derender routes) every
    answer into the window.

    Wraps the instrumented route, so it sees the final status; 401s are left
    out (they have no client, and would only be noise).
    """
    inner = instrumented(route, handler)

    async def endpoint(request: Request) -> Response:
        start = time.perf_counter()
        response = await inner(request)
        status = response.status_code
        if status == 401:
            return response
        window = api_state(request).recent
        if timed:
            window.observe(time.perf_counter() - start, status)
        if status >= 400:
            job_id = getattr(request.state, "job_id", None)
            message = _message(bytes(response.body)) if status != 499 else "client went away"
            window.error(status, message, job_id, route, caller_scope(request))
        return response

    return endpoint


def _message(body: bytes) -> str:
    try:
        return str(msgspec.json.decode(body)["error"]["message"])
    except (msgspec.DecodeError, KeyError, TypeError):
        return body[:MAX_MESSAGE].decode("utf-8", "replace")


async def _answer(route: str, handler: Handler, request: Request, public: bool) -> Response:
    try:
        if not public:
            request.state.principal = principal(api_state(request).api_keys, request.headers.get("authorization"))
        return await handler(request)
    except DerenderError as exc:
        return error_response(exc)
    except (ClientGone, ClientDisconnect):
        log.info("client disconnected before its request body was read",
                 extra={"endpoint": route, **trace_fields(request_trace(request))})
        metrics.CLIENT_DISCONNECTS.inc()
        return Response(status_code=499)
    except Exception as exc:
        if redis_failure(exc):
            return Response(unavailable_body(exc), status_code=503, media_type=JSON, headers={"Retry-After": "1"})
        trace = request_trace(request)
        log.exception("unhandled error in %s", route, extra={"endpoint": route, **trace_fields(trace)})
        message = f"internal error (request id {trace['x-request-id']})"
        return Response(error_body(500, message), status_code=500, media_type=JSON,
                        headers={"x-request-id": trace["x-request-id"]})


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route: 404, a method the route does
    not take: 405) as vLLM's HTTPException handler answers them: the status
    phrase as message and type, in its error shape (405 keeps `Allow`)."""
    assert isinstance(exc, HTTPException)
    phrase = HTTPStatus(exc.status_code).phrase
    return Response(error_body(exc.status_code, str(exc.detail), kind=phrase), status_code=exc.status_code,
                    media_type=JSON, headers=exc.headers)


def caller_scope(request: Request) -> str:
    """Whose jobs these are: the API key's identity when keys are configured."""
    return getattr(request.state, "principal", "public")
