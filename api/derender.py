"""The synchronous derender routes: read, enqueue, wait for the worker's
bytes (or the client leaving, or the timeout)."""

from __future__ import annotations

import logging

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from derender_queue.contract.error_shape import error_body
from derender_queue.contract.model_name import requested_model
from derender_queue.contract.types import JobKind
from derender_queue.logs import trace_fields

from . import metrics
from .inflight import ledger
from .instrument import JSON, caller_scope
from .intake import read_body, require_json
from .state import ApiState, api_state
from .submit import disconnected, submit_for_reply, wait_for_reply
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


async def derender(request: Request, endpoint: JobKind) -> Response:
    """One job of `endpoint`; `step` (`POST /v1/derender/step`) is many
    streams' next chunks in one job (contract/step_requests.py), and the
    worker checks the envelope and each item."""
    state, body, model = await read_request(request)
    trace = request_trace(request)
    job_id = await submit_for_reply(state, endpoint, body, model, trace, caller_scope(request))
    request.state.job_id = job_id  # for the status page's recent errors
    result = await wait_for_reply(state, job_id, model, disconnected(request.receive))
    if result is not None:
        envelope, out = result
        ledger(request).force(len(out), caller_scope(request))
        return Response(out, status_code=envelope.status, media_type=JSON, headers=trace)
    if await request.is_disconnected():  # nobody wants it any more: withdrawn
        return Response(status_code=499)
    # Timed out: the job stays for GET /v1/jobs/{id}; a worker that only
    # reaches it after the deadline answers "expired" instead of running it.
    metrics.WAIT_TIMEOUTS.inc()
    timeout = state.settings.request_timeout_s
    message = f"derender did not finish within {timeout:g} s (job {job_id})"
    log.warning("wait timed out", extra={"job_id": job_id, **trace_fields(trace)})
    return Response(
        msgspec.json.encode({**msgspec.json.decode(error_body(504, message)), "job_id": job_id}),
        status_code=504, media_type=JSON, headers=trace,
    )
