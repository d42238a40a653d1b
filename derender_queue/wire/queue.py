"""Producer-side queue operations, shared by the HTTP API and the Python client.

A submit is one MULTI/EXEC round trip: store the job, add it to its model's
queue, and push a wake token so an idle worker starts at once.
"""

from __future__ import annotations

import contextlib

from redis.asyncio import Redis
from redis.exceptions import RedisError

from derender_queue.contract import Endpoint

from .envelope import VERSION, JobEnvelope, ResultEnvelope, pack, unpack_result
from .keys import Keys, new_job_id, now_ms
from .replication import MASTER_ONLY, Durability, NotReplicated, transaction

LIGHT_BODY_BYTES = 32 * 1024
"""Bodies this small (a short generation or a stream chunk) take the fast lane."""
LIGHT_PRIORITY_MS = 60_000
"""The fast lane: a light job is ordered as if enqueued a minute earlier."""
WAKE_TOKENS_KEPT = 64
"""Tokens beyond this are trimmed: by then every worker is busy, and busy
workers read the queue itself whenever a job finishes."""


class JobQueue:
    def __init__(self, redis: Redis, keys: Keys, job_ttl_ms: int = 3_600_000,
                 durability: Durability = MASTER_ONLY) -> None:
        self.redis = redis
        self.keys = keys
        self.job_ttl_ms = job_ttl_ms
        self.durability = durability
        """Replicas a submit waits for (DERENDER_MIN_REPLICAS): NotReplicated if too few."""

    async def submit(
        self,
        endpoint: Endpoint,
        body: bytes,
        model: str,
        *,
        job_id: str | None = None,
        reply_to: str | None = None,
        deadline_ms: int | None = None,
        owner: str | None = None,
        trace: dict[str, str] | None = None,
        priority_ms: int | None = None,
    ) -> str:
        """Enqueue one derender job; returns its id.

        `priority_ms` moves the job ahead of ones enqueued up to that many
        milliseconds earlier (the queue is ordered by score); by default light
        jobs get `LIGHT_PRIORITY_MS` and their wake token goes to the front,
        so a 16-token job never waits behind a queue of 4000-token ones.
        """
        light = len(body) <= LIGHT_BODY_BYTES
        if priority_ms is None:
            priority_ms = LIGHT_PRIORITY_MS if light else 0
        job_id = job_id or new_job_id()
        enqueued = now_ms()
        envelope = JobEnvelope(
            v=VERSION, id=job_id, endpoint=endpoint, model=model, enqueued_ms=enqueued,
            reply_to=reply_to, deadline_ms=deadline_ms, owner=owner, trace=trace,
        )
        async with transaction(self.redis, self.durability) as pipe:
            # The job outlives its deadline, so the worker that reaches it late
            # can still answer "expired" for the client holding its id.
            pipe.set(self.keys.job(job_id), pack(envelope, body), px=self.job_ttl_ms)
            pipe.zadd(self.keys.queue(model), {job_id: enqueued - priority_ms})
            # Workers BRPOP the tail: RPUSH is the front of the line.
            (pipe.rpush if light else pipe.lpush)(self.keys.wake(model), job_id)
            pipe.ltrim(self.keys.wake(model), 0, WAKE_TOKENS_KEPT - 1)
            try:
                await pipe.execute()
            except NotReplicated:
                # Refused, so it should not run: withdraw it unless a worker took it already.
                with contextlib.suppress(RedisError, OSError):
                    await self.cancel(job_id, model)
                raise
        return job_id

    async def resubmit(self, endpoint: Endpoint, body: bytes, model: str, *, job_id: str,
                       owner: str | None = None, trace: dict[str, str] | None = None) -> None:
        """A retried submit of `job_id` (its Idempotency-Key was seen before):
        enqueue it if its first submit never made it (or was refused), else
        leave it be; either way wait for the replicas, so that the retry is
        acknowledged on the same terms as a first submit.

        Two retries racing could both enqueue the same id: one job, in the queue
        once, claimed once; it runs twice only if the first run finished within
        the other retry's read-then-enqueue round trip.
        """
        job, result = self.keys.job(job_id), self.keys.result(job_id)
        while True:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.pttl(job)
                pipe.pttl(result)
                ttls = await pipe.execute()
            there = [(key, ttl) for key, ttl in zip((job, result), ttls, strict=True) if ttl > 0]
            if not there:
                await self.submit(endpoint, body, model, job_id=job_id, owner=owner, trace=trace)
                return
            async with transaction(self.redis, self.durability) as pipe:
                # Unchanged, but a write: the WAIT after it covers the job's own earlier writes.
                pipe.pexpire(*there[0])
                (touched,) = await pipe.execute()
            if touched:
                return  # else it finished or expired in between: look again

    async def cancel(self, job_id: str, model: str) -> bool:
        """Withdraw a job no worker has started; True if it was withdrawn."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.zrem(self.keys.queue(model), job_id)
            pipe.delete(self.keys.job(job_id))
            removed, _ = await pipe.execute()
        return bool(removed)

    async def discard_result(self, job_id: str) -> None:
        with contextlib.suppress(RedisError, OSError):  # it expires by its TTL anyway
            await self.redis.delete(self.keys.result(job_id))

    async def peek_result(self, job_id: str) -> tuple[ResultEnvelope, bytes] | None:
        """Read a result and leave it until its TTL (`/v1/jobs`)."""
        value = await self.redis.get(self.keys.result(job_id))
        return None if value is None else unpack_result(value)

    async def is_pending(self, job_id: str) -> bool:
        return bool(await self.redis.exists(self.keys.job(job_id)))

