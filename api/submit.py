"""Enqueueing a job whose result this API process waits for (the synchronous
routes and each SSE chunk). It is owned like a `/v1/jobs` job: a wait that
times out answers 504 with the job id, and that id must open the result to
its client only (api/owner.py)."""

from __future__ import annotations

from derender_queue.contract import JobKind
from derender_queue.wire.keys import now_ms

from . import metrics
from .state import ApiState


async def submit_for_reply(state: ApiState, endpoint: JobKind, body: bytes, model: str,
                           trace: dict[str, str], owner: str) -> str:
    """Enqueue with this process's reply channel, a deadline of the request
    timeout (a worker reaching it later answers "expired") and `owner`
    signed; the job id."""
    job_id = state.queue.new_id()
    sig = await state.owners.sign(job_id, owner)
    state.waiter.expect(job_id)
    deadline_ms = now_ms() + int(state.settings.request_timeout_s * 1000)
    try:
        await state.queue.submit(endpoint, body, model, job_id=job_id, reply_to=state.waiter.reply_to,
                                 deadline_ms=deadline_ms, owner=owner, owner_sig=sig, trace=trace)
    except BaseException:
        state.waiter.forget(job_id)
        raise
    metrics.ENQUEUED.labels(endpoint).inc()
    return job_id
