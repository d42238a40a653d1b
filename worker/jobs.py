"""The job a worker runs: derender off the event loop, then publish the result.

The job function never raises: bad input, a malformed payload written
straight into Redis, an expired deadline and an internal failure all become
an error result the client can read, so nothing is retried in a loop and no
client waits forever.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from derender_queue.contract.error_shape import error_body
from derender_queue.core import Derenderer
from derender_queue.logs import trace_fields
from derender_queue.wire.cluster import SHARD
from derender_queue.wire.envelope import (
    INLINE_RESULT_BYTES,
    VERSION,
    JobEnvelope,
    ResultEnvelope,
    notification,
    pack,
)
from derender_queue.wire.failures import describe
from derender_queue.wire.keys import Keys, now_ms, parse_active, shard_of, tag_in
from derender_queue.wire.lanes import Scripts, replicated
from derender_queue.wire.queue import LIGHT_BODY_BYTES
from derender_queue.wire.replication import MASTER_ONLY, Durability
from worker import metrics
from worker.cpu_pool import CpuPool

log = logging.getLogger("derender.worker")
_PUBLISH_RETRIES = (0.2, 0.5, 1.0, 2.0, 2.0, 2.0, 2.0, 5.0, 5.0, 10.0, 10.0, 10.0)
"""About a minute of retries, then the error propagates (and the job's claim
slot is read back and run again)."""
Answer = tuple[int, bytes | bytearray, str | None]
"""A job's answer: (HTTP status, response body, model)."""


@dataclass
class JobRuntime:
    """Everything a job needs, shared by all jobs of one worker process."""

    derenderer: Derenderer
    cpu: CpuPool
    """Light jobs get their own thread, so they never queue behind heavy ones."""
    redis: Redis
    keys: Keys
    worker_id: str
    result_ttl_ms: int
    debug_delay_s: float = 0.0
    max_tries: int = 3
    max_body_bytes: int = 64 * 2**20
    durability: Durability = MASTER_ONLY
    """Replicas a result must reach before it is announced (DERENDER_MIN_REPLICAS)."""
    log_jobs: bool = False
    """DERENDER_LOG_JOBS: successful jobs log at INFO too (else at DEBUG)."""

    def __post_init__(self) -> None:
        self.scripts = Scripts(self.redis)

    async def run(self, envelope: JobEnvelope, body: bytes, *, attempt: int, active: str) -> int:
        """Execute one job and publish its result; returns the HTTP status.

        `attempt` > 1 means a worker died holding this job; after `max_tries`
        attempts the job is answered with an error instead of taking down
        another worker. `active` is the claim slot's active list: the result
        is written only while it still holds the job (wire/lanes.py FINISH),
        so a job recovered from a stalled worker is answered once.
        """
        started = now_ms()
        answer = self._refusal(envelope, body, attempt, started)
        if answer is None:
            metrics.QUEUE_WAIT.observe(max(started - envelope.enqueued_ms, 0) / 1000)
            if self.debug_delay_s:
                await asyncio.sleep(self.debug_delay_s)
            try:
                answer = await self._derender(envelope, body)
            except (RedisError, OSError):
                raise
            except Exception:  # a bug: the client gets an error result, not a wait until its timeout
                log.exception("job failed", extra={"job_id": envelope.id, **trace_fields(envelope.trace)})
                answer = 500, error_body(500, "internal error while running the job"), envelope.model
        status, _, model = answer
        value = self._result_value(envelope, *answer)
        await self._with_retries(envelope.id, lambda: self._finish(envelope, value, active))
        self._finished(envelope, status, model, started)
        return status

    async def run_batch(self, jobs: list[tuple[JobEnvelope, bytes]], attempt: int, active: str, counted: int,
                        malformed: dict[str, str]) -> None:
        """A batch of small v2 jobs: each checked alone (deadline, size, tries),
        the rest derendered in one executor call, every result written and
        announced by one script (one notification per reply channel).
        `counted`: the jobs its frame counts in the lane's batched counter
        (frames.Frame.counted). `malformed`: jobs whose
        value was not a job's (id -> why), answered with a 400."""
        started = now_ms()
        answers: list[Answer | None] = [
            (400, error_body(400, f"malformed job payload: {malformed[envelope.id]}"), None)
            if envelope.id in malformed else self._refusal(envelope, body, attempt, started)
            for envelope, body in jobs]
        todo = [i for i, answer in enumerate(answers) if answer is None]
        for i in todo:
            metrics.QUEUE_WAIT.observe(max(started - jobs[i][0].enqueued_ms, 0) / 1000)
        if todo and self.debug_delay_s:
            await asyncio.sleep(self.debug_delay_s)
        if todo:
            start = time.perf_counter()
            outcomes = await self.cpu.run_many([(jobs[i][0].endpoint, jobs[i][1], jobs[i][0].model) for i in todo])
            share = (time.perf_counter() - start) / len(todo)  # one executor call: each job its share
            for i, (status, out, model, tokens, _) in zip(todo, outcomes, strict=True):
                metrics.EXECUTION.labels(jobs[i][0].endpoint).observe(share)
                answers[i] = status, out, model
                if tokens:
                    metrics.TOKENS.labels(model).inc(tokens)
        values = [self._result_value(envelope, *answer)
                  for (envelope, _), answer in zip(jobs, answers, strict=True) if answer is not None]
        await self._with_retries(jobs[0][0].id,
                                 lambda: self._finish_batch([e for e, _ in jobs], values, active, counted - 1))
        for (envelope, _), answer in zip(jobs, answers, strict=True):
            assert answer is not None
            self._finished(envelope, answer[0], answer[2], started)

    def _refusal(self, envelope: JobEnvelope, body: bytes, attempt: int, started: int) -> Answer | None:
        """The error answer of a job that must not run, or None."""
        if envelope.deadline_ms is not None and started > envelope.deadline_ms:
            return 504, error_body(504, "job expired before a worker started it"), envelope.model
        if len(body) > self.max_body_bytes:
            # Direct producers never pass the API's size check: enforce it here.
            return 413, error_body(413, f"request body exceeds {self.max_body_bytes} bytes"), envelope.model
        if attempt > self.max_tries:
            message = f"job abandoned after {self.max_tries} attempts: the workers running it stopped (crash or kill)"
            return 500, error_body(500, message), envelope.model
        return None

    def _finished(self, envelope: JobEnvelope, status: int, model: str | None, started: int) -> None:
        endpoint = envelope.endpoint
        fields = {"job_id": envelope.id, **trace_fields(envelope.trace)}
        outcome = "ok" if status == 200 else ("client_error" if status < 500 else "error")
        metrics.JOBS.labels(endpoint, outcome).inc()
        ok_level = logging.INFO if self.log_jobs else logging.DEBUG
        level = ok_level if status == 200 else (logging.INFO if status < 500 else logging.ERROR)
        if log.isEnabledFor(level):
            log.log(level, "job finished", extra={**fields, "status": status, "endpoint": endpoint,
                                                  "model": model, "ms": now_ms() - started})

    async def _derender(self, envelope: JobEnvelope, body: bytes) -> Answer:
        start = time.perf_counter()
        light = len(body) <= LIGHT_BODY_BYTES
        status, out, model, tokens, _ = await self.cpu.run(envelope.endpoint, body, envelope.model, light)
        metrics.EXECUTION.labels(envelope.endpoint).observe(time.perf_counter() - start)
        if tokens:
            metrics.TOKENS.labels(model).inc(tokens)
        return status, out, model

    def _result_value(self, envelope: JobEnvelope, status: int, out: bytes | bytearray, model: str | None) -> bytes:
        registry = self.derenderer.registry
        sha = registry.get(model).vocab.sha256 if model is not None and model in registry.configs else None
        result = ResultEnvelope(
            v=VERSION, id=envelope.id, status=status, model=model, tokenizer_sha256=sha,
            worker=self.worker_id, finished_ms=now_ms(),
            owner=envelope.owner, owner_sig=envelope.owner_sig, trace=envelope.trace,
        )
        return pack(result, out)

    async def _with_retries(self, job_id: str, write: Callable[[], Awaitable[None]]) -> None:
        """`write` until it succeeds. A write that failed in any way (redis-py's
        cluster client fails calls with errors of any type: wire/failures.py)
        may or may not have happened: it is written again (each write is
        fenced or idempotent), never given up for a Redis blip."""
        for delay in _PUBLISH_RETRIES:
            try:
                await write()
                return
            except Exception as exc:
                log.warning("publishing result failed (%s); retrying in %.1fs", describe(exc), delay,
                            extra={"job_id": job_id})
                await asyncio.sleep(delay)
        await write()

    def _channel(self, envelope: JobEnvelope) -> str:
        """Where a v2 job's notification goes: the reply channel, or on a Redis
        Cluster the reply channel of the job's shard (published with SPUBLISH);
        "" for a job without one."""
        if not envelope.reply_to:
            return ""
        if self.keys.cluster:
            return self.keys.shard_done(shard_of(envelope.id) or SHARD, envelope.reply_to)
        return self.keys.done(envelope.reply_to)

    async def _finish(self, envelope: JobEnvelope, value: bytes, active: str) -> None:
        """Wire format v2: fence, result and notification in one script (with
        replicas to wait for, the notification follows once they have it). A
        retry whose first try ran finds the active list empty: nothing to do.
        A result too large to announce is SET beside the script, which renames
        it (`finish_large`): a script's arguments are copied, slowly."""
        job_id = envelope.id
        channel = self._channel(envelope)
        announce = channel and not self.durability.replicas
        large = len(value) > INLINE_RESULT_BYTES
        script = self.scripts.finish_large if large else self.scripts.finish
        keys = [active, self.keys.job(job_id)]
        commands: list[tuple[Any, ...]] = []
        if large:
            keys.append(self.keys.out(job_id))
            commands.append(("SET", keys[-1], value, "PX", self.result_ttl_ms))
            args: list[str | bytes | int] = [channel if announce else "", job_id]
        else:
            args = [value, self.result_ttl_ms, channel if announce else "", "1", job_id]
        if self.keys.cluster and announce:  # declared: SPUBLISH in the script's slot
            keys.append(channel)
            args.append("SPUBLISH")
        commands.append(("EVALSHA", script.sha, len(keys), *keys, *args))
        written = (await replicated(self.redis, self.durability, commands, script))[-1]
        if written == -1:
            raise ResponseError(f"the result of job {job_id} did not reach Redis")  # nothing changed: again
        if written == 0 and channel and not announce and await self.redis.get(keys[1]) == value:
            # Our own earlier try wrote it, and its WAIT fell short (NotReplicated): this try's
            # WAIT, which succeeded, covers it. Announce it now, or nobody ever does.
            await self._announce(envelope, value, False)
        elif written == 0:
            log.info("result not written here: the claim is gone (recovered by another worker, or an earlier try "
                     "of this finish whose reply was lost wrote it)", extra={"job_id": job_id})
        elif written == 2:
            log.debug("result not written: the job was withdrawn or expired", extra={"job_id": job_id})
        elif channel and (not announce or written == 3):
            await self._announce(envelope, value, written == 3)

    async def _announce(self, envelope: JobEnvelope, value: bytes, failed: bool) -> None:
        """The notification of `envelope`'s result `value`, sent once it is written: with replicas to
        wait for, or again after the script's publish failed. The result is
        written and the claim gone, so when the publish failed in the script,
        this one is best effort (logged; waiters fall back to reading the key)."""
        job_id, channel = envelope.id, self._channel(envelope)
        message = notification(job_id, value)
        try:
            if self.keys.cluster:
                await self.redis.execute_command("SPUBLISH", channel, message)  # type: ignore[no-untyped-call]  # redis-py 5 leaves it unannotated
            else:
                await self.redis.publish(channel, message)
        except Exception as exc:
            if not failed:
                raise
            log.warning("result written, but its notification failed (%s)", describe(exc), extra={"job_id": job_id})

    async def _finish_batch(self, envelopes: list[JobEnvelope], values: list[bytes], active: str, taken: int) -> None:
        """`_finish` for a batch (wire/lanes.py FINISH_BATCH): with replicas to
        wait for (or when a publish failed), the notifications follow once
        the results are written. `taken`: jobs off the lane's batched counter
        (the batch's count beyond its first job)."""
        announce = not self.durability.replicas
        args: list[str | bytes | int] = [self.result_ttl_ms, "SPUBLISH" if self.keys.cluster else "PUBLISH", taken]
        channels: dict[str, None] = {}
        for envelope, value in zip(envelopes, values, strict=True):
            channel = self._channel(envelope) if announce else ""
            if channel:
                channels[channel] = None
            args += [value, channel, "1" if len(value) <= INLINE_RESULT_BYTES else "0", envelope.id]
        script = self.scripts.finish_batch
        batched = self.keys.batched(tag_in(active), parse_active(active)[1])  # the lane's, whatever the jobs say
        keys = [active, batched, *(self.keys.job(e.id) for e in envelopes)]
        if self.keys.cluster:  # declared: SPUBLISH in the script's slot
            keys += channels
        (reply,) = await replicated(self.redis, self.durability, [
            ("EVALSHA", script.sha, len(keys), *keys, *args)], script)
        if reply == 0:
            log.info("batch not written here: the claim is gone (recovered by another worker, or an earlier try "
                     "of this finish whose reply was lost wrote it)",
                     extra={"job_id": envelopes[0].id})
        elif not announce or reply[0] == 3:  # the results the script wrote (now on the replicas too)
            for i in reply[1:]:
                envelope, value = envelopes[int(i) - 1], values[int(i) - 1]
                if envelope.reply_to:
                    await self._announce(envelope, value, reply[0] == 3)
