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
from collections.abc import Awaitable
from typing import Any, cast

from redis.asyncio import Redis
from redis.exceptions import RedisError

from derender_queue.wire.envelope import JobEnvelope, WireError, unpack_job
from derender_queue.wire.keys import Keys, now_ms
from worker.arq_adapter import ArqWorker, blocking_client, func, in_progress_key

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

    def __init__(self, *, keys: Keys, model: str, pool: Redis, lease_s: float = 10.0, **kwargs: Any) -> None:
        settings = {k: v for k, v in vars(WorkerSettings).items() if not k.startswith("_")}
        super().__init__(
            queue_name=keys.queue(model),
            redis_pool=pool,  # type: ignore[arg-type]  # arq sends it plain commands only (ArqRedis's own are unused)
            health_check_key=keys.health(model),
            **{**settings, **kwargs},
        )
        self.wake_key = keys.wake(model)
        self.lease_ms = int(lease_s * 1000)
        self._waker: Redis | None = None

    async def main(self) -> None:
        # arq's main() minus its INFO log line (fakeredis has no INFO) and its
        # fixed-interval poll loop.
        self.ctx["redis"] = self.pool
        if self.on_startup:
            await self.on_startup(self.ctx)
        self._waker = blocking_client(self.pool)
        leases = asyncio.create_task(self._renew_leases())
        try:
            while True:
                try:
                    await self._serve_queue()
                except (OSError, RedisError) as exc:
                    # Redis went away: keep the jobs we hold, retry until it is back.
                    log.warning("queue unavailable (%s: %s); retrying", type(exc).__name__, exc)
                    await asyncio.sleep(min(self.poll_delay_s, 0.5))
        finally:
            leases.cancel()
            with contextlib.suppress(Exception):
                if self._waker is not self.pool:
                    await self._waker.aclose()

    async def _serve_queue(self) -> None:
        since_poll = 0
        await self.poll_queue()
        while True:
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
            except (OSError, RedisError) as exc:
                log.warning("lease renewal failed: %s", exc)

    async def start_jobs(self, job_ids: list[bytes]) -> None:
        """arq's start_jobs with the claim in one round trip instead of four.

        arq WATCHes the in-progress key, checks it and the queue score, then
        MULTI/EXECs the claim; `SET NX` inside one MULTI with the ZSCORE read is
        the same guarantee (only one worker claims, and only a job still queued
        and due) for a quarter of the round trips.
        """
        for raw_id in job_ids:
            await self.sem.acquire()
            if self.job_counter >= self.max_jobs:
                self.sem.release()
                return
            self.job_counter += 1
            job_id = raw_id.decode()
            score = await self._claim(job_id)
            if score is None:
                self.job_counter -= 1
                self.sem.release()
                continue
            task = self.loop.create_task(self.run_job(job_id, score))
            task.add_done_callback(lambda _: self.release_slot())
            self.tasks[job_id] = task

    async def _claim(self, job_id: str) -> int | None:
        key = in_progress_key(job_id)
        async with self.pool.pipeline(transaction=True) as pipe:
            pipe.set(key, b"1", nx=True, px=self.lease_ms)
            pipe.zscore(self.queue_name, job_id)
            claimed, score = await pipe.execute()
        if not claimed:
            return None  # running elsewhere
        if score is None or score > now_ms():
            await self.pool.delete(key)  # finished, withdrawn or deferred meanwhile
            return None
        return int(score)

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
            popped = await cast(Awaitable[list[bytes] | None], brpop)  # the async client's reply
        except (OSError, RedisError) as exc:
            log.warning("wake wait failed (%s); polling", exc)
            await asyncio.sleep(self.poll_delay_s)
            return None
        if popped is None or popped[1] == b"1":
            return None  # timed out, or a bare "look at the queue" token
        job_id: bytes = popped[1]
        return job_id
