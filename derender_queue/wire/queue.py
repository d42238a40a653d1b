"""Producer-side queue operations, shared by the HTTP API and the Python client.

A submit is one MULTI/EXEC round trip: store the job, add it to its model's
queue, and push a wake token so an idle worker starts at once. An
idempotency slot is bound in the same MULTI (WATCHed, so of two racing
submits one binds it and the other reads it): a slot never names a job that
was not stored and queued, whatever happens to the connection.

A wake list or queue of the wrong type (anyone with write access can SET it
to a string) would fail every submit; the submit repairs it instead (see
`_retype`), logs it and reports it to `on_repair`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import RedisError, ResponseError, WatchError

from derender_queue.contract import JobKind

from .connection import in_memory
from .depth import queue_depth
from .envelope import (
    ENVELOPE_PEEK_BYTES,
    VERSION,
    JobEnvelope,
    ResultEnvelope,
    WireError,
    pack,
    peek_job,
    result_view,
)
from .failures import ignoring_redis_failures
from .keys import Keys, new_job_id, now_ms, shard_of
from .lanes import replicated
from .queue_v2 import CLUSTER_SHARDS, LaneQueue, is_cluster
from .replication import MASTER_ONLY, Durability, NotReplicated, transaction

log = logging.getLogger("derender.queue")

LIGHT_BODY_BYTES = 32 * 1024
"""Bodies this small (a short generation or a stream chunk) take the fast lane."""
LIGHT_PRIORITY_MS = 60_000
"""The fast lane: a light job is ordered as if enqueued a minute earlier."""
WAKE_TOKENS_KEPT = 64
"""Tokens beyond this are trimmed: by then every worker is busy, and busy
workers read the queue itself whenever a job finishes."""


_WATCH_TRIES = 8
"""WATCHed transactions retried this often before the error is raised."""


@dataclass(frozen=True)
class Slot:
    """An idempotency slot: the key bound to one job, and what it was used with."""

    key: str
    fingerprint: str
    """No spaces (stored as "job-id fingerprint")."""
    ttl_s: int


@dataclass(frozen=True)
class Lookup:
    """A job as one atomic read saw it: finished, pending or neither."""

    result: tuple[ResultEnvelope, memoryview] | None
    pending: bool
    job: JobEnvelope | None
    """The pending job's envelope, when its first bytes hold a valid one."""


class JobQueue:
    def __init__(self, redis: Redis, keys: Keys, job_ttl_ms: int = 3_600_000,
                 on_repair: Callable[[str], None] | None = None, durability: Durability = MASTER_ONLY,
                 wire_format: int = 2, batching: bool = True, shards: int = CLUSTER_SHARDS) -> None:
        self.redis = redis
        self.keys = keys
        self.job_ttl_ms = job_ttl_ms
        self.on_repair = on_repair
        """Called with "wake" or "queue" when a wrong-typed key was repaired."""
        self.durability = durability
        """Replicas a submit waits for (DERENDER_MIN_REPLICAS): NotReplicated if too few."""
        self.wire_format = 1 if in_memory(redis) else 2 if is_cluster(redis) else wire_format
        """What new submits write (DERENDER_WIRE_FORMAT; v1 on the embedded
        in-memory Redis, which has no Lua; v2 on a Redis Cluster, where v1's
        MULTIs span slots); jobs of either are read by their id."""
        self.v2 = LaneQueue(redis, keys, job_ttl_ms, durability, batching, shards)

    def new_id(self) -> str:
        """A job id of the wire format this producer writes."""
        return self.v2.new_id() if self.wire_format == 2 else new_job_id()

    def id_for_slot(self, slot_key: str) -> str:
        """A new job id for the job an idempotency slot will bind (v2: of its shard)."""
        return self.v2.id_for_slot(slot_key) if self.wire_format == 2 else new_job_id()

    def idempotency_key(self, scope: str, key_hash: str) -> str:
        """Where an Idempotency-Key is bound (v2: in its job's shard)."""
        return self.v2.slot_key(scope, key_hash) if self.wire_format == 2 else self.keys.idempotency(scope, key_hash)

    async def depth(self, model: str) -> int:
        return await queue_depth(self.redis, self.keys, model, self.v2.tags)

    async def submit(
        self,
        endpoint: JobKind,
        body: bytes,
        model: str,
        *,
        job_id: str | None = None,
        reply_to: str | None = None,
        deadline_ms: int | None = None,
        owner: str | None = None,
        owner_sig: str | None = None,
        trace: dict[str, str] | None = None,
        priority_ms: int | None = None,
    ) -> str:
        """Enqueue one derender job; returns its id.

        `priority_ms` moves the job ahead of ones enqueued up to that many
        milliseconds earlier (the queue is ordered by score); by default light
        jobs get `LIGHT_PRIORITY_MS` and their wake token goes to the front,
        so a 16-token job never waits behind a queue of 4000-token ones.
        """
        job_id, _ = await self.submit_once(
            None, endpoint, body, model, job_id=job_id, reply_to=reply_to, deadline_ms=deadline_ms,
            owner=owner, owner_sig=owner_sig, trace=trace, priority_ms=priority_ms,
        )
        return job_id

    async def submit_once(
        self, slot: Slot | None, endpoint: JobKind, body: bytes, model: str, *, job_id: str | None = None,
        priority_ms: int | None = None, **envelope: Any,
    ) -> tuple[str, str | None]:
        """Enqueue a job and bind `slot` to it in the same transaction.

        Returns (job id, None) when this call enqueued it, or (the bound job's
        id, the fingerprint it was bound with) when the slot was already taken.
        """
        if self.wire_format == 2:
            job_id = job_id or (self.v2.id_for_slot(slot.key) if slot else self.v2.new_id())
            return await self._submit_v2(slot, endpoint, body, model, job_id, envelope)
        light = len(body) <= LIGHT_BODY_BYTES
        if priority_ms is None:
            priority_ms = LIGHT_PRIORITY_MS if light else 0
        job_id = job_id or new_job_id()
        enqueued = now_ms()
        value = pack(JobEnvelope(v=VERSION, id=job_id, endpoint=endpoint, model=model, enqueued_ms=enqueued,
                                 **envelope), body)
        score = enqueued - priority_ms
        for _ in range(_WATCH_TRIES):
            try:
                bound = await self._enqueue(slot, job_id, value, model, score, light)
                if bound is None and slot is not None:
                    await self._replicated(job_id)
            except WatchError:
                continue  # another submit took the slot meanwhile: read it
            except NotReplicated:
                # Refused, so it should not run: withdraw it unless a worker took it already.
                with ignoring_redis_failures():
                    await self.cancel(job_id, model)
                raise
            if bound is None:
                return job_id, None
            bound_id, _, fingerprint = bound.decode().partition(" ")
            return bound_id, fingerprint
        raise WatchError(f"idempotency slot {slot.key if slot else ''} kept changing")

    async def _submit_v2(self, slot: Slot | None, endpoint: JobKind, body: bytes, model: str, job_id: str,
                         envelope: dict[str, Any]) -> tuple[str, str | None]:
        try:
            if slot is None:
                return await self.v2.submit(endpoint, body, model, job_id, **envelope), None
            bound = await self.v2.submit_once(slot.key, slot.fingerprint, slot.ttl_s, endpoint, body, model,
                                              job_id, **envelope)
        except NotReplicated:
            with ignoring_redis_failures():
                await self.v2.cancel(job_id)
            raise
        if bound is None:
            return job_id, None
        bound_id, _, fingerprint = bound.decode().partition(" ")
        return bound_id, fingerprint

    async def _enqueue(self, slot: Slot | None, job_id: str, value: bytes, model: str, score: int,
                       light: bool) -> bytes | None:
        """One transaction; the slot's value instead when it is already bound."""
        queue, wake = self.keys.queue(model), self.keys.wake(model)
        # WATCH needs redis-py's own pipeline; a slot's submit waits for the
        # replicas afterwards (`_replicated`), a plain one in the same round trip.
        pipeline = self.redis.pipeline(transaction=True) if slot else transaction(self.redis, self.durability)
        async with pipeline as pipe:
            if slot is not None:
                await pipe.watch(slot.key)
                bound: bytes | None = await pipe.get(slot.key)
                if bound is not None:
                    return bound
                pipe.multi()  # type: ignore[no-untyped-call]  # redis-py 5 leaves it unannotated
                pipe.set(slot.key, f"{job_id} {slot.fingerprint}", ex=slot.ttl_s)
            # The job outlives its deadline, so the worker that reaches it late
            # can still answer "expired" for the client holding its id.
            pipe.set(self.keys.job(job_id), value, px=self.job_ttl_ms)
            pipe.zadd(queue, {job_id: score})
            self._wake(pipe, wake, job_id, light)
            replies = await pipe.execute(raise_on_error=False)
        zadd, push, trim = replies[-3:]
        for reply in replies[:-3]:
            if isinstance(reply, Exception):
                raise reply
        # MULTI does not roll back: a failed ZADD left the job stored but not
        # queued, a failed push left it queued without a wake token.
        if isinstance(zadd, Exception):
            await self._retype(zadd, queue, "zset", "queue", lambda p: p.zadd(queue, {job_id: score}))
        if isinstance(push, Exception) or isinstance(trim, Exception):
            error = push if isinstance(push, Exception) else trim
            with _hint_only(wake):
                await self._retype(error, wake, "list", "wake", lambda p: self._wake(p, wake, job_id, light))
        return None

    @staticmethod
    def _wake(pipe: Pipeline, wake: str, job_id: str, light: bool) -> None:
        # Workers BRPOP the tail: RPUSH is the front of the line.
        (pipe.rpush if light else pipe.lpush)(wake, job_id)
        pipe.ltrim(wake, 0, WAKE_TOKENS_KEPT - 1)

    async def _retype(self, error: Exception, key: str, kind: str, name: str,
                      redo: Callable[[Pipeline], object]) -> None:
        """Replace `key` by an empty one of the right type, then redo the
        write. Only a key holding another type is deleted (checked under
        WATCH): it holds nothing of ours, since our writes to it all failed."""
        if not _wrong_type(error):
            raise error
        for _ in range(_WATCH_TRIES):
            async with self.redis.pipeline(transaction=True) as pipe:
                await pipe.watch(key)
                found = _text(await pipe.type(key))
                pipe.multi()  # type: ignore[no-untyped-call]  # redis-py 5 leaves it unannotated
                if found not in (kind, "none"):
                    pipe.delete(key)
                redo(pipe)
                try:
                    await pipe.execute()
                except WatchError:
                    continue
            if found not in (kind, "none"):
                log.warning("repaired %s: it was a %s, not a %s", key, found, kind)
                if self.on_repair is not None:
                    self.on_repair(name)
            return
        raise WatchError(f"{key} kept changing")

    async def _replicated(self, job_id: str) -> None:
        """Wait for the replicas to have this job (nothing to do without
        DERENDER_MIN_REPLICAS). WAIT counts a connection's own writes, so one
        more write (the job's TTL, unchanged) goes first: the replication
        stream is ordered, so replicas that have it have the job too."""
        if not self.durability.replicas:
            return
        async with transaction(self.redis, self.durability) as pipe:
            pipe.pexpire(self.keys.job(job_id), self.job_ttl_ms)
            await pipe.execute()

    async def resubmit(self, endpoint: JobKind, body: bytes, model: str, *, job_id: str,
                       **envelope: Any) -> None:
        """A retried submit of `job_id` (its Idempotency-Key is bound to it)
        under DERENDER_MIN_REPLICAS: enqueue it again if its first submit was
        refused (withdrawn for too few replicas), else leave it be; either way
        wait for the replicas, so the retry is acknowledged on the same terms as
        a first submit. Without replicas to wait for, a bound key always names a
        job that was stored and queued: nothing to do.

        Two retries racing could both enqueue the same id: one job, in the queue
        once, claimed once; it runs twice only if the first run finished within
        the other retry's read-then-enqueue round trip.
        """
        if not self.durability.replicas:
            return
        if shard_of(job_id):
            if await self.v2.exists(job_id):
                await self._replicated_v2(job_id)
            else:
                await self.submit(endpoint, body, model, job_id=job_id, **envelope)
            return
        job, result = self.keys.job(job_id), self.keys.result(job_id)
        while True:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.pttl(job)
                pipe.pttl(result)
                ttls = await pipe.execute()
            there = [(key, ttl) for key, ttl in zip((job, result), ttls, strict=True) if ttl > 0]
            if not there:
                await self.submit(endpoint, body, model, job_id=job_id, **envelope)
                return
            async with transaction(self.redis, self.durability) as pipe:
                # Unchanged, but a write: the WAIT after it covers the job's own earlier writes.
                pipe.pexpire(*there[0])
                (touched,) = await pipe.execute()
            if touched:
                return  # else it finished or expired in between: look again

    async def _replicated_v2(self, job_id: str) -> None:
        key = self.keys.job_v2(job_id)
        ttl = await self.redis.pttl(key)
        if ttl > 0:  # unchanged, but a write: the WAIT after it covers the job's own earlier writes
            await replicated(self.redis, self.durability, [("PEXPIRE", key, ttl)])

    async def cancel(self, job_id: str, model: str) -> bool:
        """Withdraw a job no worker has started (v2: one whose result is not
        written yet); True if it was withdrawn."""
        if shard_of(job_id):
            return await self.v2.cancel(job_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.zrem(self.keys.queue(model), job_id)
            pipe.delete(self.keys.job(job_id))
            removed, _ = await pipe.execute()
        return bool(removed)

    async def discard_result(self, job_id: str) -> None:
        key = self.keys.job_v2(job_id) if shard_of(job_id) else self.keys.result(job_id)
        with ignoring_redis_failures():  # it expires by its TTL anyway
            await self.redis.delete(key)

    async def peek_result(self, job_id: str) -> tuple[ResultEnvelope, memoryview] | None:
        """Read a result and leave it until its TTL (`/v1/jobs`)."""
        if shard_of(job_id):
            return (await self.v2.read(job_id))[0]
        value = await self.redis.get(self.keys.result(job_id))
        return None if value is None else result_view(value)

    async def lookup(self, job_id: str) -> Lookup:
        """The result, or whether the job is still pending, in one atomic read:
        a worker writes the result and deletes the job in one MULTI, so this
        sees one or the other, never neither while the job lives. Of the job
        only its first bytes are read (its owner is in the envelope line)."""
        if shard_of(job_id):
            return Lookup(*await self.v2.read(job_id))
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.get(self.keys.result(job_id))
            pipe.getrange(self.keys.job(job_id), 0, ENVELOPE_PEEK_BYTES - 1)
            value, head = await pipe.execute(raise_on_error=False)
        result = None
        if isinstance(value, bytes):
            try:
                result = result_view(value)
            except WireError as exc:  # not ours to serve: someone wrote garbage there
                log.warning("unreadable result for job %s: %s", job_id, exc, extra={"job_id": job_id})
        elif isinstance(value, Exception) and not _wrong_type(value):
            raise value
        if isinstance(head, Exception) and not _wrong_type(head):
            raise head
        pending = isinstance(head, bytes) and bool(head)
        return Lookup(result, pending, peek_job(head) if pending and isinstance(head, bytes) else None)

    async def is_pending(self, job_id: str) -> bool:
        if shard_of(job_id):
            return (await self.v2.read(job_id))[1]
        return bool(await self.redis.exists(self.keys.job(job_id)))


def _wrong_type(error: object) -> bool:
    return isinstance(error, ResponseError) and str(error).startswith("WRONGTYPE")


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@contextlib.contextmanager
def _hint_only(wake: str) -> Iterator[None]:
    """A wake list only carries hints (workers also read the queue): a client
    whose Redis user may not repair it still has its job queued."""
    try:
        yield
    except RedisError as exc:
        log.warning("wake list %s is unusable and could not be repaired (%s); workers still poll", wake, exc)
