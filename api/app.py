"""The HTTP API: validate cheaply, enqueue, return the worker's bytes.

It never loads a tokenizer and never does per-token work; derender bodies
pass through as bytes (api/body.py says what is checked).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import msgspec
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.asyncio import Redis
from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from derender_queue.contract import error_body
from derender_queue.errors import DerenderError
from derender_queue.logs import trace_fields
from derender_queue.queue import JobQueue
from derender_queue.settings import Settings
from derender_queue.waiter import ResultWaiter
from derender_queue.wire import Endpoint, Keys, new_job_id, now_ms
from worker.heartbeat import live_workers

from . import metrics, sse
from .auth import principal
from .body import read_body, requested_model
from .openapi import openapi_document

log = logging.getLogger("derender.api")
JSON = "application/json"


@dataclass
class ApiState:
    settings: Settings
    redis: Redis
    keys: Keys
    queue: JobQueue
    waiter: ResultWaiter
    model_names: list[str]
    """Served model names from the models config (no tokenizer is loaded)."""
    queue_depth: dict[str, int] = field(default_factory=dict)
    """Refreshed every heartbeat interval by `watch_queues` (metrics, backpressure)."""
    enqueued_since_refresh: dict[str, int] = field(default_factory=dict)
    api_keys: dict[str, str] = field(default_factory=dict)

    def admit(self, model: str) -> None:
        """Backpressure: above `max_queue_depth` refuse (429) instead of
        queueing without bound."""
        limit = self.settings.max_queue_depth
        if not limit:
            return
        depth = self.queue_depth.get(model, 0) + self.enqueued_since_refresh.get(model, 0)
        if depth >= limit:
            metrics.REJECTED.labels("queue_full").inc()
            raise DerenderError(f"queue for `{model}` is full ({depth} jobs waiting); retry later", status=429)
        self.enqueued_since_refresh[model] = self.enqueued_since_refresh.get(model, 0) + 1

    @property
    def default_model(self) -> str:
        return self.model_names[0]

    def resolve_model(self, name: str | None) -> str:
        if not name:
            return self.default_model
        if name not in self.model_names:
            raise DerenderError(
                f"The model `{name}` does not exist. Valid aliases: {', '.join(self.model_names)}.",
                status=404, param="model",
            )
        return name


def _error(exc: DerenderError) -> Response:
    headers = {"Retry-After": "1"} if exc.status in (429, 503) else None
    if exc.status == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    return Response(exc.body(), status_code=exc.status, media_type=JSON, headers=headers)


def _unavailable(exc: Exception) -> Response:
    body = error_body(503, f"Redis is unavailable, retry shortly ({type(exc).__name__})")
    return Response(body, status_code=503, media_type=JSON, headers={"Retry-After": "1"})


def instrumented(route: str, handler: Callable[[Request], Awaitable[Response]], *, public: bool = False):
    """Metrics, API-key check (unless `public`) and error mapping for a route."""

    async def endpoint(request: Request) -> Response:
        start = time.perf_counter()
        metrics.IN_FLIGHT.inc()
        try:
            try:
                if not public:
                    request.state.principal = principal(_state(request).api_keys, request.headers.get("authorization"))
                response = await handler(request)
            except DerenderError as exc:
                response = _error(exc)
            except (RedisError, OSError) as exc:
                response = _unavailable(exc)
        finally:
            metrics.IN_FLIGHT.dec()
        metrics.REQUESTS.labels(route, str(response.status_code)).inc()
        metrics.LATENCY.labels(route).observe(time.perf_counter() - start)
        return response

    return endpoint


def _state(request: Request) -> ApiState:
    return request.app.state.api


async def _prepare(request: Request) -> tuple[ApiState, bytes, str]:
    state = _state(request)
    body = await read_body(request, state.settings.max_body_bytes)
    model = state.resolve_model(requested_model(body))
    state.admit(model)
    return state, body, model


def _trace(request: Request) -> dict[str, str]:
    """`X-Request-Id` (ours when the client sent none) and W3C `traceparent`:
    they travel with the job into the worker's logs and come back."""
    trace = {k: request.headers[k] for k in ("x-request-id", "traceparent") if k in request.headers}
    trace.setdefault("x-request-id", new_job_id())
    return trace


async def _derender(request: Request, endpoint: Endpoint) -> Response:
    state, body, model = await _prepare(request)
    timeout = state.settings.request_timeout_s
    job_id = new_job_id()
    trace = _trace(request)
    state.waiter.expect(job_id)
    try:
        await state.queue.submit(
            endpoint, body, model, job_id=job_id, reply_to=state.waiter.reply_to,
            deadline_ms=now_ms() + int(timeout * 1000), trace=trace,
        )
    except BaseException:
        state.waiter.forget(job_id)
        raise
    metrics.ENQUEUED.labels(endpoint).inc()
    result = await _wait_or_disconnect(request, state, job_id, timeout)
    if result is None:
        if await request.is_disconnected():
            # Nobody wants it any more: withdraw it unless a worker started it.
            with contextlib.suppress(RedisError, OSError):
                if await state.queue.cancel(job_id, model):
                    metrics.CANCELLED.inc()
            return Response(status_code=499)
        # Timed out: the job stays for GET /v1/jobs/{id}; a worker that only
        # reaches it after the deadline answers "expired" instead of running it.
        metrics.WAIT_TIMEOUTS.inc()
        message = f"derender did not finish within {timeout:g} s (job {job_id})"
        log.warning("wait timed out", extra={"job_id": job_id, **trace_fields(trace)})
        return Response(
            msgspec.json.encode({**msgspec.json.decode(error_body(504, message)), "job_id": job_id}),
            status_code=504, media_type=JSON, headers=trace,
        )
    envelope, out = result
    return Response(out, status_code=envelope.status, media_type=JSON, headers=trace)


async def _wait_or_disconnect(request: Request, state: ApiState, job_id: str, timeout: float):
    """The result, or None when the client left or the wait timed out."""
    waiting = asyncio.ensure_future(state.waiter.wait(state.queue, job_id, timeout))
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        done, _ = await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
        return waiting.result() if waiting in done else None
    finally:
        for task in (waiting, gone):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.gather(waiting, gone)


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def chat(request: Request) -> Response:
    return await _derender(request, "chat")


async def completion(request: Request) -> Response:
    return await _derender(request, "completion")


# ------------------------------------------------------------------ /v1/jobs


def _scope(request: Request) -> str:
    """Whose jobs these are: the API key's identity when keys are configured."""
    return getattr(request.state, "principal", "public")


async def submit_job(request: Request) -> Response:
    endpoint = request.query_params.get("endpoint", "chat")
    if endpoint not in ("chat", "completion"):
        raise DerenderError("`endpoint` must be 'chat' or 'completion'", param="endpoint")
    state, body, model = await _prepare(request)
    owner = _scope(request)
    key = request.headers.get("idempotency-key")
    job_id = None
    if key is not None:
        job_id, created = await _idempotent_id(state, owner, key, body)
        if not created:
            return JSONResponse({"id": job_id, "status": "pending"}, status_code=202)
    job_id = await state.queue.submit(endpoint, body, model, job_id=job_id, owner=owner, trace=_trace(request))
    metrics.ENQUEUED.labels(endpoint).inc()
    return JSONResponse({"id": job_id, "status": "pending"}, status_code=202, headers={"Location": f"/v1/jobs/{job_id}"})


async def _idempotent_id(state: ApiState, owner: str, key: str, body: bytes) -> tuple[str, bool]:
    """The job id bound to (owner, key): a new one, or the existing one for the
    same body; a different body under the same key is a 409."""
    digest = hashlib.sha256(body).hexdigest()
    slot = state.keys.idempotency(owner, hashlib.sha256(key.encode()).hexdigest())
    job_id = new_job_id()
    if await state.redis.set(slot, f"{job_id} {digest}", nx=True, ex=state.settings.job_ttl_s):
        return job_id, True
    existing = (await state.redis.get(slot) or b"").decode().split(" ")
    if len(existing) == 2 and existing[1] == digest:
        return existing[0], False
    raise DerenderError("Idempotency-Key was already used with a different request body", status=409)


async def get_job(request: Request) -> Response:
    state = _state(request)
    job_id = request.path_params["job_id"]
    result = await state.queue.peek_result(job_id)
    if result is not None:
        envelope, out = result
        if envelope.owner in (None, _scope(request)):
            status = "done" if envelope.status == 200 else "error"
            field = b"result" if status == "done" else b"error_response"
            head = msgspec.json.encode({"id": job_id, "status": status, "http_status": envelope.status})
            return Response(head[:-1] + b',"' + field + b'":' + out + b"}", media_type=JSON)
    elif await state.queue.is_pending(job_id):
        return JSONResponse({"id": job_id, "status": "pending"})
    return JSONResponse({"id": job_id, "status": "unknown"}, status_code=404)


# ------------------------------------------------------------------ health


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def ready(request: Request) -> Response:
    state = _state(request)
    try:
        await state.redis.ping()
        workers = await live_workers(state.redis, state.keys)
    except (RedisError, OSError) as exc:
        return JSONResponse({"ready": False, "redis": f"unreachable: {type(exc).__name__}"}, status_code=503,
                            headers={"Retry-After": "1"})
    served = sorted({m for w in workers for m in w.models})
    return JSONResponse({
        "ready": True, "redis": "ok", "workers": len(workers), "models": served,
        "configured_models": state.model_names,
        "tokenizers": {m: sorted({w.models[m] for w in workers if m in w.models}) for m in served},
    })


async def models(request: Request) -> Response:
    state = _state(request)
    workers = await live_workers(state.redis, state.keys)
    names = sorted({m for w in workers for m in w.models})
    created = int(time.time())
    data = [{"id": n, "object": "model", "created": created, "owned_by": "derender-queue"} for n in names]
    return JSONResponse({"object": "list", "data": data})


async def metrics_endpoint(request: Request) -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


async def openapi(request: Request) -> Response:
    return Response(request.app.state.openapi, media_type=JSON)


async def watch_queues(state: ApiState, interval_s: float) -> None:
    """Queue depths and live workers, for /metrics and backpressure. The API
    exports them (not only workers) so an autoscaler sees work at zero workers."""
    while True:
        try:
            for model in state.model_names:
                depth = await state.redis.zcard(state.keys.queue(model))
                state.queue_depth[model] = depth
                state.enqueued_since_refresh[model] = 0
                metrics.QUEUE_DEPTH.labels(model).set(depth)
            workers = await live_workers(state.redis, state.keys)
            for model in state.model_names:
                metrics.WORKERS_LIVE.labels(model).set(sum(model in w.models for w in workers))
        except (RedisError, OSError):
            pass
        await asyncio.sleep(interval_s)


def create_app(state_factory: Callable[[], Awaitable[ApiState]]) -> Starlette:
    """The ASGI app; `state_factory` connects Redis and starts the result waiter."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
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
        *sse.routes(instrumented),  # streaming derender over SSE (api/sse.py)
        Route("/v1/jobs", instrumented("jobs_submit", submit_job), methods=["POST"]),
        Route("/v1/jobs/{job_id}", instrumented("jobs_get", get_job), methods=["GET"]),
        Route("/v1/models", instrumented("models", models), methods=["GET"]),
        Route("/health", instrumented("health", health, public=True), methods=["GET"]),
        Route("/ready", instrumented("ready", ready), methods=["GET"]),
        Route("/metrics", instrumented("metrics", metrics_endpoint), methods=["GET"]),
        Route("/openapi.json", instrumented("openapi", openapi), methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)
