"""Enqueueing a job whose result this API process waits for (the synchronous
routes and each SSE chunk), and that wait. It is owned like a `/v1/jobs`
job: a wait that times out answers 504 with the job id, and that id must
open the result to its client only (api/owner.py)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable

from starlette.types import Receive

from derender_queue.contract.types import JobKind
from derender_queue.wire.envelope import ResultEnvelope
from derender_queue.wire.failures import ignoring_redis_failures
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


async def wait_for_reply(state: ApiState, job_id: str, model: str,
                         leaving: Awaitable[object]) -> tuple[ResultEnvelope, memoryview] | None:
    """The job's answer; None when none came within the request timeout, or
    when `leaving` (the client gone) finished first: then the job is
    withdrawn, unless a worker started it."""
    waiting = asyncio.ensure_future(state.waiter.wait(state.queue, job_id, state.settings.request_timeout_s))
    gone = asyncio.ensure_future(leaving)
    try:
        done, _ = await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:  # cancelled (server shutdown) too: leave no waiter behind
        for task in (waiting, gone):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.gather(waiting, gone)
    if waiting in done:
        return waiting.result()
    with ignoring_redis_failures():  # it expires at its deadline anyway
        if await state.queue.cancel(job_id, model):
            metrics.CANCELLED.inc()
    return None


async def disconnected(receive: Receive) -> None:
    """Returns once the client has gone (call after its body ended)."""
    while (await receive())["type"] != "http.disconnect":
        pass
