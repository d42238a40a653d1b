"""The HTTP API: validate cheaply, enqueue, return the worker's bytes.

It never loads a tokenizer and never does per-token work; derender bodies
pass through as bytes (api/intake.py says what is checked). This module only
wires routes and the app's lifecycle; each concept has its own module:

    state.py       what routes share          admission.py  backpressure (429)
    instrument.py  metrics, auth, errors      derender.py   the synchronous routes
    submit.py      enqueue for a reply        job_routes.py /v1/jobs (+ idempotency.py)
    sse.py         streaming over SSE         status_routes.py  health, ready, models, metrics
    watcher.py     queue depths, live workers trace.py      request id / traceparent
    status_page.py /status, /status.json      recent.py     the last minute seen (status page)
    intake.py      content type, body, model  inflight.py   bytes in flight (503), memory.py
    owner.py       signed job owners
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import Route

from derender_queue.wire.background import keep_running
from derender_queue.wire.cluster import quiet_replaced_nodes

from . import memory, metrics
from .derender import derender
from .inflight import InflightMiddleware
from .instrument import http_error, instrumented, observed
from .job_routes import get_job, submit_job
from .metrics import background_error
from .openapi import openapi_document
from .sse import derender_sse
from .state import ApiState
from .status_page import status_json, status_page
from .status_routes import health, metrics_endpoint, models, openapi, ready
from .watcher import watch_queues


def create_app(state_factory: Callable[[], Awaitable[ApiState]]) -> Starlette:
    """The ASGI app; `state_factory` connects Redis and starts the result waiter."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        memory.tune()
        state = await state_factory()
        if state.keys.cluster:
            quiet_replaced_nodes(asyncio.get_running_loop())
        app.state.api = state
        app.state.openapi = openapi_document()
        await state.waiter.start()
        watcher = keep_running("queue-watcher", lambda: watch_queues(state), background_error)
        lag = keep_running("loop-lag", metrics.sample_loop_lag, background_error)
        try:
            yield
        finally:
            watcher.cancel()
            lag.cancel()
            await state.waiter.close()
            with contextlib.suppress(Exception):
                await state.redis.aclose()

    routes = [
        Route("/v1/chat/completions/derender", observed("chat", partial(derender, endpoint="chat")), methods=["POST"]),
        Route("/v1/completions/derender", observed("completion", partial(derender, endpoint="completion")),
              methods=["POST"]),
        Route("/v1/derender/step", observed("step", partial(derender, endpoint="step")), methods=["POST"]),
        Route("/v1/chat/completions/derender/sse",
              observed("chat_sse", partial(derender_sse, endpoint="chat"), timed=False), methods=["POST"]),
        Route("/v1/completions/derender/sse",
              observed("completion_sse", partial(derender_sse, endpoint="completion"), timed=False),
              methods=["POST"]),
        Route("/v1/jobs", observed("jobs_submit", submit_job, timed=False), methods=["POST"]),
        Route("/v1/jobs/{job_id}", instrumented("jobs_get", get_job), methods=["GET"]),
        Route("/v1/models", instrumented("models", models), methods=["GET"]),
        Route("/health", instrumented("health", health, public=True), methods=["GET"]),
        Route("/ready", instrumented("ready", ready), methods=["GET"]),
        Route("/metrics", instrumented("metrics", metrics_endpoint), methods=["GET"]),
        Route("/openapi.json", instrumented("openapi", openapi), methods=["GET"]),
        Route("/status", instrumented("status", status_page), methods=["GET"]),
        Route("/status.json", instrumented("status_json", status_json), methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(InflightMiddleware)],
                     exception_handlers={HTTPException: http_error})
