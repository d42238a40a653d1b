"""`POST /v1/jobs` and `GET /v1/jobs/{id}`: asynchronous jobs, scoped to the caller."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from derender_queue.contract import Endpoint
from derender_queue.errors import DerenderError
from derender_queue.wire.connection import confirm_master

from . import metrics
from .derender import read_request
from .idempotency import idempotent_job_id
from .instrument import JSON, caller_scope
from .state import api_state
from .trace import request_trace


async def submit_job(request: Request) -> Response:
    endpoint = _endpoint(request.query_params.get("endpoint", "chat"))
    state, body, model = await read_request(request)
    owner = caller_scope(request)
    key = request.headers.get("idempotency-key")
    job_id = None
    if key is not None:
        job_id, created = await idempotent_job_id(state, owner, key, body)
        if not created:  # a retry: enqueue it if its first submit failed, wait for the replicas
            await state.queue.resubmit(endpoint, body, model, job_id=job_id, owner=owner, trace=request_trace(request))
            return JSONResponse({"id": job_id, "status": "pending"}, status_code=202)
    job_id = await state.queue.submit(endpoint, body, model, job_id=job_id, owner=owner, trace=request_trace(request))
    metrics.ENQUEUED.labels(endpoint).inc()
    return JSONResponse({"id": job_id, "status": "pending"}, status_code=202,
                        headers={"Location": f"/v1/jobs/{job_id}"})


def _endpoint(name: str) -> Endpoint:
    if name == "chat":
        return "chat"
    if name == "completion":
        return "completion"
    raise DerenderError("`endpoint` must be 'chat' or 'completion'", param="endpoint")


async def get_job(request: Request, second_look: bool = False) -> Response:
    state = api_state(request)
    job_id = request.path_params["job_id"]
    result = await state.queue.peek_result(job_id)
    if result is not None:
        envelope, out = result
        if envelope.owner in (None, caller_scope(request)):
            status = "done" if envelope.status == 200 else "error"
            field = b"result" if status == "done" else b"error_response"
            head = msgspec.json.encode({"id": job_id, "status": status, "http_status": envelope.status})
            return Response(head[:-1] + b',"' + field + b'":' + out + b"}", media_type=JSON)
    elif await state.queue.is_pending(job_id):
        return JSONResponse({"id": job_id, "status": "pending"})
    elif not second_look:
        # It may have finished between the two reads (a worker writes the result as it
        # removes the job), or they reached a demoted master: look once more.
        await confirm_master(state.redis)
        return await get_job(request, second_look=True)
    return JSONResponse({"id": job_id, "status": "unknown"}, status_code=404)
