"""The HTTP API: validate cheaply, enqueue, return the worker's bytes.

It never loads a tokenizer and never does per-token work; derender bodies
pass through as bytes (api/body.py says what is checked). This module only
wires routes and the app's lifecycle; each concept has its own module:

    state.py       what routes share          admission.py  backpressure (429)
    instrument.py  metrics, auth, errors      derender.py   the synchronous routes
    submit.py      enqueue for a reply        jobs.py       /v1/jobs (+ idempotency.py)
    sse.py         streaming over SSE         status_routes.py  health, ready, models, metrics
    watcher.py     queue depths, live workers trace.py      request id / traceparent
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.applications import Starlette
from starlette.routing import Route

from . import sse
from .derender import chat, completion
from .instrument import instrumented
from .jobs import get_job, submit_job
from .openapi import openapi_document
from .state import ApiState
from .status_routes import health, metrics_endpoint, models, openapi, ready
from .watcher import watch_queues


def create_app(state_factory: Callable[[], Awaitable[ApiState]]) -> Starlette:
    """The ASGI app; `state_factory` connects Redis and starts the result waiter."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state = await state_factory()
        app.state.api = state
        app.state.openapi = openapi_document()
        await state.waiter.start()
        watcher = asyncio.create_task(watch_queues(state, state.settings.heartbeat_s))
        try:
            yield
        finally:
            watcher.cancel()
            await state.waiter.close()
            with contextlib.suppress(Exception):
                await state.redis.aclose()

    routes = [
        Route("/v1/chat/completions/derender", instrumented("chat", chat), methods=["POST"]),
        Route("/v1/completions/derender", instrumented("completion", completion), methods=["POST"]),
        Route("/v1/chat/completions/derender/sse", instrumented("chat_sse", sse.chat), methods=["POST"]),
        Route("/v1/completions/derender/sse", instrumented("completion_sse", sse.completion), methods=["POST"]),
        Route("/v1/jobs", instrumented("jobs_submit", submit_job), methods=["POST"]),
        Route("/v1/jobs/{job_id}", instrumented("jobs_get", get_job), methods=["GET"]),
        Route("/v1/models", instrumented("models", models), methods=["GET"]),
        Route("/health", instrumented("health", health, public=True), methods=["GET"]),
        Route("/ready", instrumented("ready", ready), methods=["GET"]),
        Route("/metrics", instrumented("metrics", metrics_endpoint), methods=["GET"]),
        Route("/openapi.json", instrumented("openapi", openapi), methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)
