"""Jobs a wire format v1 producer left in Redis: answered with an error, never lost silently.

Wire format v1 (a sorted set of job ids per model, a key per job, the result
at a key of its own) was removed in 0.2.0 (README's changelog). A v1 job
queued before the upgrade, or by a producer not yet moved to v2, would wait
in Redis until its TTL with nobody to answer it. So every worker looks at
its model's v1 queue when it starts and every `interval_s` after (one ZRANGE
of a key that does not exist, once v1 is gone), and answers each job there
the way v1 answered: an error result at `{p}:result:{id}`, where a v1
producer reads it, and the notification on its `reply_to` channel. The job
is not run: its producer must move to v2 (docs/wire-format.md).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from redis.asyncio.client import Pipeline

from derender_queue.contract.error_shape import error_body
from derender_queue.wire.envelope import ENVELOPE_PEEK_BYTES, ResultEnvelope, notification, pack, peek_job
from derender_queue.wire.failures import describe, redis_failure
from derender_queue.wire.keys import now_ms
from worker import metrics

if TYPE_CHECKING:
    from worker.jobs import JobRuntime

log = logging.getLogger("derender.worker")
V1_STATUS = 400
V1_REMOVED = ("wire format v1 is no longer served (removed in derender-queue 0.2.0): this job was not run; "
              "submit it again as wire format v2 (docs/wire-format.md)")
BATCH = 100
"""Ids answered per round trip."""


async def answer_v1_leftovers(runtime: JobRuntime, model: str, interval_s: float) -> None:
    """Answer `model`'s v1 jobs now and every `interval_s`, until cancelled."""
    while True:
        try:
            await answer_once(runtime, model)
        except Exception as exc:  # never stop: the next pass tries again
            if not redis_failure(exc):
                log.exception("answering wire format v1 jobs failed", extra={"model": model})
            else:
                log.warning("answering wire format v1 jobs failed (%s)", describe(exc), extra={"model": model})
        await asyncio.sleep(interval_s)


async def answer_once(runtime: JobRuntime, model: str) -> int:
    """Answer every job in `model`'s v1 queue with V1_REMOVED; how many."""
    redis, keys = runtime.redis, runtime.keys
    queue = keys.v1_queue(model)
    answered = 0
    while ids := await redis.zrange(queue, 0, BATCH - 1):
        async with redis.pipeline(transaction=False) as pipe:
            for raw in ids:
                pipe.getrange(keys.v1_job("").encode() + raw, 0, ENVELOPE_PEEK_BYTES - 1)
            heads = await pipe.execute(raise_on_error=False)
        async with redis.pipeline(transaction=True) as pipe:
            for raw, head in zip(ids, heads, strict=True):
                _answer(runtime, pipe, queue, raw, head if isinstance(head, bytes) else b"")
            await pipe.execute()
        answered += len(ids)
    if answered:
        metrics.JOBS.labels("unknown", "client_error").inc(answered)
        log.warning("answered %d wire format v1 job(s) with an error: v1 was removed in 0.2.0", answered,
                    extra={"model": model})
    return answered


def _answer(runtime: JobRuntime, pipe: Pipeline, queue: str, raw: bytes, head: bytes) -> None:
    """Queue one v1 job's answer on the MULTI `pipe`: its error result (NX:
    a result already there stays), the job off its queue and gone, the
    notification to its `reply_to`."""
    keys = runtime.keys
    job_id = raw.decode(errors="replace")
    envelope = peek_job(head)
    result = ResultEnvelope(
        v=1, id=job_id, status=V1_STATUS, model=envelope.model if envelope else None, worker=runtime.worker_id,
        finished_ms=now_ms(), owner=envelope.owner if envelope else None,
        owner_sig=envelope.owner_sig if envelope else None, trace=envelope.trace if envelope else None,
    )
    value = pack(result, error_body(V1_STATUS, V1_REMOVED))
    pipe.set(keys.v1_result("").encode() + raw, value, px=runtime.result_ttl_ms, nx=True)
    pipe.zrem(queue, raw)
    pipe.delete(keys.v1_job("").encode() + raw)
    if envelope is not None and envelope.reply_to:
        pipe.publish(keys.done(envelope.reply_to), notification(job_id, value))
