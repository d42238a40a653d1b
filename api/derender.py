"""The synchronous derender routes: read, enqueue, wait for the worker's
bytes (or the client leaving, or the timeout)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from derender_queue.contract import JobKind, error_body
from derender_queue.contract.model_name import requested_model
from derender_queue.logs import trace_fields
from derender_queue.wire.envelope import ResultEnvelope
from derender_queue.wire.failures import ignoring_redis_failures

from . import metrics
from .inflight import ledger
from .instrument import JSON, caller_scope
from .intake import read_body, require_json
from .state import ApiState, api_state
from .submit import submit_for_reply
from .trace import request_trace

log = logging.getLogger("derender.api")


async def read_request(request: Request) -> tuple[ApiState, bytes, str]:
    """The body (JSON, size-capped, within the in-flight budget), the model
    it names, and admission for it."""
    state = api_state(request)
    require_json(request)
    settings = state.settings
    body = await read_body(request, settings.max_body_bytes, settings.body_idle_timeout_s, ledger(request),
                           caller_scope(request))
    model = state.resolve_model(requested_model(body))
    await state.admission.admit(model)
    return state, body, model


async def chat(request: Request) -> Response:
    return await _derender(request, "chat")


async def completion(request: Request) -> Response:
    return await _derender(request, "completion")


async def step(request: Request) -> Response:
    """`POST /v1/derender/step`: many streams' next chunks in one job
    (contract/step_requests.py); the worker checks the envelope and each item."""
    return await _derender(request, "step")


async def _derender(request: Request, endpoint: JobKind) -> Response:
    state, body, model = await read_request(request)
    timeout = state.settings.request_timeout_s
    trace = request_trace(request)
    job_id = await submit_for_reply(state, endpoint, body, model, trace, caller_scope(request))
    request.state.job_id = job_id  # for the status page's recent errors
    result = await _wait_or_disconnect(request, state, job_id, timeout)
    if result is not None:
        envelope, out = result
        ledger(request).force(len(out), caller_scope(request))
        return Response(out, status_code=envelope.status, media_type=JSON, headers=trace)
    if await request.is_disconnected():
        # Nobody wants it any more: withdraw it unless a worker started it.
        with ignoring_redis_failures():
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


async def _wait_or_disconnect(request: Request, state: ApiState, job_id: str,
                              timeout: float) -> tuple[ResultEnvelope, memoryview] | None:
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
