"""`POST /v1/jobs` and `GET /v1/jobs/{id}`: asynchronous jobs, scoped to the caller.

A job the API enqueues carries its caller as `owner`, signed (api/owner.py);
anyone else asking for it gets the 404 an unknown id gets, while it is
pending and once it is done. A job is read in one atomic step (result, or
the first bytes of the pending job for its owner), so a live job is never
"unknown", not even at the instant a worker finishes it.
"""

from __future__ import annotations

from typing import cast, get_args

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from derender_queue.contract.types import JobKind
from derender_queue.errors import DerenderError
from derender_queue.wire.connection import confirm_master

from . import metrics
from .derender import read_request
from .idempotency import submit_idempotent
from .inflight import ledger
from .instrument import JSON, caller_scope
from .state import api_state
from .trace import request_trace


async def submit_job(request: Request) -> Response:
    endpoint = cast(JobKind, request.query_params.get("endpoint", "chat"))
    if endpoint not in get_args(JobKind):
        raise DerenderError("`endpoint` must be 'chat', 'completion' or 'step'", param="endpoint")
    state, body, model = await read_request(request)
    owner = caller_scope(request)
    trace = request_trace(request)
    key = request.headers.get("idempotency-key")
    if key is None:
        job_id = state.queue.new_id()
        sig = await state.owners.sign(job_id, owner)
        await state.queue.submit(endpoint, body, model, job_id=job_id, owner=owner, owner_sig=sig, trace=trace)
        created = True
    else:
        job_id, created = await submit_idempotent(state, owner, key, endpoint, body, model, trace=trace)
        if not created:  # a retry: enqueued again if its first submit was refused, then replicated
            await state.queue.resubmit(endpoint, body, model, job_id=job_id, owner=owner,
                                       owner_sig=await state.owners.sign(job_id, owner), trace=trace)
    if created:
        metrics.ENQUEUED.labels(endpoint).inc()
    return JSONResponse({"id": job_id, "status": "pending"}, status_code=202,
                        headers={"Location": f"/v1/jobs/{job_id}"})


async def get_job(request: Request, second_look: bool = False) -> Response:
    state = api_state(request)
    job_id = request.path_params["job_id"]
    caller = caller_scope(request)
    found = await state.queue.lookup(job_id)
    if found.result is not None:
        envelope, out = found.result
        if await state.owners.owner(job_id, envelope.owner, envelope.owner_sig) in (None, caller):
            ledger(request).force(len(out), caller)
            status = "done" if envelope.status == 200 else "error"
            field = b"result" if status == "done" else b"error_response"
            head = msgspec.json.encode({"id": job_id, "status": status, "http_status": envelope.status})
            return Response(head[:-1] + b',"' + field + b'":' + out + b"}", media_type=JSON)
    elif found.pending:
        job = found.job
        if job is None or await state.owners.owner(job_id, job.owner, job.owner_sig) in (None, caller):
            return JSONResponse({"id": job_id, "status": "pending"})
    elif not second_look:
        # Neither result nor job: it may have reached a demoted master (Sentinel); look once more.
        await confirm_master(state.redis)
        return await get_job(request, second_look=True)
    return JSONResponse({"id": job_id, "status": "unknown"}, status_code=404)
