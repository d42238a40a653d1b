"""The wrapper every route goes through: metrics, the API-key check and the
mapping of errors to vLLM's error shape."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from redis.exceptions import RedisError
from starlette.requests import Request
from starlette.responses import Response

from derender_queue.contract import error_body
from derender_queue.errors import DerenderError

from . import metrics
from .auth import principal
from .state import api_state

JSON = "application/json"
Handler = Callable[[Request], Awaitable[Response]]


def error_response(exc: DerenderError) -> Response:
    headers = {"Retry-After": "1"} if exc.status in (429, 503) else None
    if exc.status == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    return Response(exc.body(), status_code=exc.status, media_type=JSON, headers=headers)


def unavailable_response(exc: Exception) -> Response:
    body = error_body(503, f"Redis is unavailable, retry shortly ({type(exc).__name__})")
    return Response(body, status_code=503, media_type=JSON, headers={"Retry-After": "1"})


def instrumented(route: str, handler: Handler, *, public: bool = False) -> Handler:
    """Metrics, API-key check (unless `public`) and error mapping for a route."""

    async def endpoint(request: Request) -> Response:
        start = time.perf_counter()
        metrics.IN_FLIGHT.inc()
        try:
            try:
                if not public:
                    request.state.principal = principal(api_state(request).api_keys,
                                                        request.headers.get("authorization"))
                response = await handler(request)
            except DerenderError as exc:
                response = error_response(exc)
            except (RedisError, OSError) as exc:
                response = unavailable_response(exc)
        finally:
            metrics.IN_FLIGHT.dec()
        metrics.REQUESTS.labels(route, str(response.status_code)).inc()
        metrics.LATENCY.labels(route).observe(time.perf_counter() - start)
        return response

    return endpoint


def caller_scope(request: Request) -> str:
    """Whose jobs these are: the API key's identity when keys are configured."""
    return getattr(request.state, "principal", "public")
