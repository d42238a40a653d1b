"""arq, extended: JSON wire format, our key prefix, and wake-ups instead of polling.

Stock arq 0.28 sleeps `poll_delay` (0.5 s) between queue polls and pickles
jobs (bench/arq_spike.py). `DerenderWorker` keeps arq's job lifecycle
(in-progress key, retries, shutdown) and changes three things:

- it waits on the model's wake list (BRPOP) instead of sleeping; a wake
  token names its job, which starts without reading the queue, so a job
  starts about two Redis round trips after it is enqueued and an idle worker
  costs one blocked connection rather than a busy poll loop;
- it claims a job in one round trip instead of four (`start_jobs`);
- jobs are wire format v1 (derender_queue.wire), never pickle;
- arq's bookkeeping keys are moved under our key prefix.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Coroutine
from typing import Any, cast

from redis.asyncio import Redis

from derender_queue.wire.envelope import JobEnvelope, WireError, unpack_job
from derender_queue.wire.failures import describe, ignoring_redis_failures, redis_failure
from derender_queue.wire.keys import Keys, now_ms
from derender_queue.wire.pacing import Backoff, blocked
from derender_queue.wire.queue_v2 import SHARD
from worker import metrics
from worker.arq_adapter import ArqWorker, blocking_client, func, in_progress_key, retry_key
from worker.bad_entries import (
    QueueTypeWatch,
    drop_unusable_id,
    is_wrong_type,
    job_value_problem,
    repair_wake_key,
    usable_id,
)
from worker.lane_server import lane_tasks
from worker.liveness import Liveness

log = logging.getLogger("derender.worker")
POLL_EVERY_HINTS = 8
"""A queue read now and then finds jobs whose wake token was trimmed away."""


class Body(bytes):
    """The request body; arq logs `repr()` of job arguments (even with logging
    off), which for a 5 MB body would cost tens of milliseconds on the loop."""

    def __repr__(self) -> str:
        return f"<body {len(self)} bytes>"


def deserialize_job(value: bytes) -> dict[str, Any]:
    """arq's job dict from a wire-format job. Never raises: a malformed payload
    becomes a job that answers with an error result instead of running."""
    try:
        envelope, body = unpack_job(value)
    except WireError as exc:
        return {"f": "derender", "a": (None, Body(), str(exc)), "k": {}, "t": None, "et": now_ms()}
    except Exception as exc:  # arq would drop the job with no result: answer it instead
        log.exception("reading a job value failed")
        return {"f": "derender", "a": (None, Body(), f"unreadable: {type(exc).__name__}"), "k": {}, "t": None,
                "et": now_ms()}
    return {"f": "derender", "a": (envelope, Body(body), None), "k": {}, "t": None, "et": envelope.enqueued_ms}


def serialize_unused(_: dict[str, Any]) -> bytes:
    """arq wants a serializer for its own result records; we keep none."""
    return b"{}"


async def derender(ctx: dict[str, Any], envelope: JobEnvelope | None, body: bytes, problem: str | None) -> int:
    status: int = await ctx["runtime"].run(ctx["job_id"], envelope, body, problem, attempt=ctx["job_try"])
    return status


class WorkerSettings:
    """arq settings shared by every derender worker (`DerenderWorker` adds the
    queue, the pool and the per-process limits)."""

    functions = (func(derender, name="derender"),)
    job_serializer = staticmethod(serialize_unused)
    job_deserializer = staticmethod(deserialize_job)
    keep_result = 0  # results are ours (wire format), not arq's
    # Only a worker dying mid-job makes arq try again (our job never raises);
    # JobRuntime answers with an error after DERENDER_MAX_TRIES attempts, so
    # arq's own limit, after which it would drop the job silently, is never hit.
    max_tries = 1000
    handle_signals = False  # one process may run several workers: signals are ours


class DerenderWorker(ArqWorker):
    """An arq worker for one model's queue."""

    def __init__(self, *, keys: Keys, model: str, pool: Redis, lease_s: float = 10.0,
                 liveness: Liveness | None = None, recover_every_s: float = 2.0, tags: tuple[str, ...] = (SHARD,),
                 **kwargs: Any) -> None:
        settings = {k: v for k, v in vars(WorkerSettings).items() if not k.startswith("_")}
        super().__init__(
            queue_name=keys.queue(model),
            redis_pool=pool,  # type: ignore[arg-type]  # arq sends it plain commands only (ArqRedis's own are unused)
            health_check_key=keys.health(model),
            **{**settings, **kwargs},
        )
        self.keys = keys
        self.model = model
        self.wake_key = keys.wake(model)
        self.lease_ms = int(lease_s * 1000)
        self.liveness = liveness or Liveness()
        self.recover_every_s = recover_every_s
        """How often the v2 lane looks for dead workers' jobs (wire format v2)."""
        self.tags = tags
        """The v2 shards this worker claims from: one on a single Redis, every
        shard of a Redis Cluster (where it serves no v1 queue: v1 spans slots)."""
        self._queue_type = QueueTypeWatch(self.queue_name)
        self._waker: Redis | None = None

    async def main(self) -> None:
        # arq's main() minus its INFO log line (fakeredis has no INFO) and its
        # fixed-interval poll loop.
        self.ctx["redis"] = self.pool
        if self.on_startup:
            await self.on_startup(self.ctx)
        lanes = lane_tasks(self, self.recover_every_s)
        if self.keys.cluster:
            try:
                await asyncio.gather(*lanes)  # they end only when cancelled (shutdown)
            finally:
                for task in lanes:
                    task.cancel()
            return
        self._waker = blocking_client(self.pool, block_s=self.poll_delay_s)
        leases = asyncio.create_task(self._renew_leases())
        backoff = Backoff(min(self.poll_delay_s, 0.5))
        try:
            while True:
                try:
                    await self._serve_queue(backoff)
                except Exception as exc:
                    if not redis_failure(exc):
                        # A bug: logged and counted; the loop carries on, but reports no
                        # progress, so a loop that keeps failing shows in /health.
                        log.exception("job loop error; carrying on", extra={"model": self.model})
                        metrics.JOB_LOOP_ERRORS.labels(self.model).inc()
                        await backoff.wait()
                        continue
                    delay = backoff.next_s()
                    if is_wrong_type(exc):
                        self._queue_type.seen_wrong(exc)
                    else:  # Redis went away: keep the jobs we hold, retry until it is back.
                        log.warning("queue unavailable (%s); retrying in %.1f s", describe(exc), delay)
                    # Waiting for Redis (or for an operator) is not a dead loop.
                    self.liveness.progress(self.model, delay)
                    await asyncio.sleep(delay)
        finally:
            leases.cancel()
            for task in lanes:
                task.cancel()
            with contextlib.suppress(Exception):
                if self._waker is not self.pool:
                    await self._waker.aclose()

    async def _serve_queue(self, backoff: Backoff) -> None:
        since_poll = 0
        await self.poll_queue()
        self._queue_type.seen_right()
        backoff.reset()  # the queue answered
        while True:
            self.liveness.progress(self.model, self.poll_delay_s)  # the next wait lasts at most this
            hint = await self._wait_for_work()
            if hint is not None and self.allow_pick_jobs and self.job_counter < self.max_jobs:
                # The wake token names its job: start it without reading the queue.
                await self.start_jobs([hint])
                self._reap_finished()
                since_poll += 1
                if since_poll < POLL_EVERY_HINTS:
                    continue
            since_poll = 0
            await self.poll_queue()

    async def _renew_leases(self) -> None:
        """Liveness, not timeouts: a claim lasts `lease_s` and this renews the
        claims of every job still held, so a job of a live worker is never
        started twice however long it runs, while a killed worker's jobs are
        free again `lease_s` after its last renewal."""
        while True:
            await asyncio.sleep(self.lease_ms / 4000)
            held = [job_id for job_id, task in self.tasks.items() if not task.done()]
            if not held:
                continue
            try:
                async with self.pool.pipeline(transaction=False) as pipe:
                    for job_id in held:
                        pipe.pexpire(in_progress_key(job_id), self.lease_ms)
                    await pipe.execute()
            except Exception as exc:  # never let renewals stop: a lapsed lease means a job run twice
                if redis_failure(exc):
                    log.warning("lease renewal failed: %s", describe(exc))
                else:
                    log.exception("lease renewal failed")

    async def start_jobs(self, job_ids: list[bytes]) -> None:
        """arq's start_jobs with the claim in one round trip instead of four.

        arq WATCHes the in-progress key, checks it and the queue score, then
        MULTI/EXECs the claim; `SET NX` inside one MULTI with the ZSCORE read is
        the same guarantee (only one worker claims, and only a job still queued
        and due) for a quarter of the round trips. An id that cannot name a job
        is dropped, and a failed claim gives its slot back, so no entry can stop
        this loop or leak its concurrency.
        """
        for raw_id in job_ids:
            job_id = usable_id(raw_id)
            if job_id is None:
                await drop_unusable_id(self.pool, self.keys, self.queue_name, raw_id)
                continue
            if self.sem.locked():
                self.liveness.waiting_for_jobs(self.model)  # a running job frees the slot
            await self.sem.acquire()
            self.liveness.progress(self.model, self.poll_delay_s)
            if self.job_counter >= self.max_jobs:
                self.sem.release()
                return
            self.job_counter += 1
            try:
                start = await self._claim(job_id)
            except BaseException:
                self.release_slot()
                raise
            if start is None:
                self.release_slot()
                continue
            task = self.loop.create_task(start)
            task.add_done_callback(lambda _: self.release_slot())
            self.tasks[job_id] = task

    async def _claim(self, job_id: str) -> Coroutine[Any, Any, None] | None:
        """Claim a due job; what to run for it (the job, or its rejection), or
        None when it is not ours to run. The job key's type and length come
        with the claim, never its (possibly multi-MB) value."""
        key, job_key = in_progress_key(job_id), self.keys.job(job_id)
        async with self.pool.pipeline(transaction=True) as pipe:
            pipe.set(key, b"1", nx=True, px=self.lease_ms)
            pipe.zscore(self.queue_name, job_id)
            pipe.type(job_key)
            pipe.strlen(job_key)  # an error, not a length, for a non-string: hence raise_on_error=False
            claimed, score, kind, size = await pipe.execute(raise_on_error=False)
        if isinstance(claimed, Exception):
            raise claimed
        if not claimed:
            return None  # running elsewhere
        if isinstance(score, Exception) or score is None or score > now_ms():
            await self.pool.delete(key)  # finished, withdrawn or deferred meanwhile (or no queue at all)
            if isinstance(score, Exception):
                raise score
            return None
        problem = job_value_problem(kind, size)
        if problem is not None:
            return self._reject(job_id, *problem)
        return self.run_job(job_id, int(score))

    async def _reject(self, job_id: str, reason: str, message: str) -> None:
        """One 400 result for a job value that cannot be a job, and the job gone."""
        metrics.START_FAILURES.labels(reason).inc()
        try:
            await self.ctx["runtime"].reject(job_id, self.queue_name, 400, message,
                                             claim_keys=(in_progress_key(job_id), retry_key(job_id)))
        except Exception as exc:
            if not redis_failure(exc):
                raise
            log.warning("rejecting a job failed (%s); retried once its lease lapses", describe(exc),
                        extra={"job_id": job_id})

    async def run_job(self, job_id: str, score: int) -> None:
        """arq's run_job, whose errors never reach arq's poll (which re-raises
        them in this loop). A job key retyped after the claim is rejected; a
        Redis failure leaves the claim to lapse, so the job is retried."""
        try:
            await super().run_job(job_id, score)
        except Exception as exc:  # whichever: the claim lapses and the job is run again
            if not redis_failure(exc):
                metrics.START_FAILURES.labels("internal").inc()
                log.exception("job failed outside the derender", extra={"job_id": job_id})
                return
            if is_wrong_type(exc) and await self._job_key_retyped(job_id):
                return
            metrics.START_FAILURES.labels("redis").inc()
            log.warning("job failed in Redis (%s); retried once its lease lapses", describe(exc),
                        extra={"job_id": job_id})

    def _reap_finished(self) -> None:
        """What arq's poll does with finished tasks (and their errors)."""
        for job_id, task in list(self.tasks.items()):
            if task.done():
                del self.tasks[job_id]
                if not task.cancelled() and task.exception() is not None:
                    log.error("job task failed: %r", task.exception(), extra={"job_id": job_id})

    async def poll_queue(self) -> None:
        # arq's, but finished tasks are reaped without re-raising their errors
        # (a Redis outage during finish_job must not stop the worker).
        self._reap_finished()
        await super().poll_queue()

    async def _job_key_retyped(self, job_id: str) -> bool:
        """Reject the job if its key was retyped after the claim (arq's GET failed)."""
        with ignoring_redis_failures():
            problem = job_value_problem(await self.pool.type(self.keys.job(job_id)), -1)
            if problem is not None:
                await self._reject(job_id, *problem)
                return True
        return False

    async def _wait_for_work(self) -> bytes | None:
        """Block until there may be work; the job id a wake token names, if any."""
        if not self.allow_pick_jobs or self.job_counter >= self.max_jobs:
            # Full: the next poll is useful once one of our jobs has finished.
            running = [t for t in self.tasks.values() if not t.done()]
            if running:
                await asyncio.wait(running, timeout=self.poll_delay_s, return_when=asyncio.FIRST_COMPLETED)
            else:
                await asyncio.sleep(self.poll_delay_s)
            return None
        waker = self._waker
        assert waker is not None, "set in main() before the first poll"
        try:
            # Redis >= 6 takes a fractional timeout; redis-py's stubs say int.
            brpop = waker.brpop([self.wake_key], timeout=self.poll_delay_s)  # type: ignore[arg-type]
            popped = await blocked(cast(Awaitable[list[bytes] | None], brpop), self.poll_delay_s)
        except Exception as exc:
            if not redis_failure(exc):
                raise
            if is_wrong_type(exc) and await repair_wake_key(self.pool, self.wake_key):
                return None  # repaired: read the queue now
            log.warning("wake wait failed (%s); polling", describe(exc))
            await asyncio.sleep(self.poll_delay_s)
            return None
        if popped is None or popped[1] == b"1":
            return None  # timed out, or a bare "look at the queue" token
        job_id: bytes = popped[1]
        return job_id
