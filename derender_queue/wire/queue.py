"""Producer-side queue operations, shared by the HTTP API and the Python client.

Wire format v2 only (docs/wire-format.md): `LaneQueue` (wire/queue_v2.py)
writes and reads the keys; this module adds what the API needs around it: an
idempotency slot bound in the script that enqueues its job (so a slot never
names a job that was not stored and queued, whatever happens to the
connection), a retried submit under DERENDER_MIN_REPLICAS, and one atomic
read of a job's state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from derender_queue.contract import JobKind

from .depth import queue_depth
from .envelope import JobEnvelope, ResultEnvelope
from .failures import ignoring_redis_failures
from .keys import Keys
from .lanes import replicated
from .queue_v2 import CLUSTER_SHARDS, LaneQueue
from .replication import MASTER_ONLY, Durability, NotReplicated

LIGHT_BODY_BYTES = 32 * 1024
"""Bodies this small (a short generation or a stream chunk) run on the light thread."""


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
    def __init__(self, redis: Redis, keys: Keys, job_ttl_ms: int = 3_600_000, durability: Durability = MASTER_ONLY,
                 batching: bool = True, shards: int = CLUSTER_SHARDS) -> None:
        self.redis = redis
        self.keys = keys
        self.job_ttl_ms = job_ttl_ms
        self.durability = durability
        """Replicas a submit waits for (DERENDER_MIN_REPLICAS): NotReplicated if too few."""
        self.v2 = LaneQueue(redis, keys, job_ttl_ms, durability, batching, shards)

    def new_id(self) -> str:
        return self.v2.new_id()

    def id_for_slot(self, slot_key: str) -> str:
        """A new job id for the job an idempotency slot will bind (of the slot's shard)."""
        return self.v2.id_for_slot(slot_key)

    def idempotency_key(self, scope: str, key_hash: str) -> str:
        """Where an Idempotency-Key is bound (in its job's shard)."""
        return self.v2.slot_key(scope, key_hash)

    async def depth(self, model: str) -> int:
        return await queue_depth(self.redis, self.keys, model, self.v2.tags)

    async def submit(
        self, endpoint: JobKind, body: bytes, model: str, *, job_id: str | None = None, **envelope: Any,
    ) -> str:
        """Enqueue one derender job; returns its id. `envelope`: the optional
        fields of `JobEnvelope` (reply_to, deadline_ms, owner, owner_sig, trace)."""
        job_id, _ = await self.submit_once(None, endpoint, body, model, job_id=job_id, **envelope)
        return job_id

    async def submit_once(
        self, slot: Slot | None, endpoint: JobKind, body: bytes, model: str, *, job_id: str | None = None,
        **envelope: Any,
    ) -> tuple[str, str | None]:
        """Enqueue a job and bind `slot` to it in the same script.

        Returns (job id, None) when this call enqueued it, or (the bound job's
        id, the fingerprint it was bound with) when the slot was already taken.
        """
        job_id = job_id or (self.v2.id_for_slot(slot.key) if slot else self.v2.new_id())
        try:
            if slot is None:
                return await self.v2.submit(endpoint, body, model, job_id, **envelope), None
            bound = await self.v2.submit_once(slot.key, slot.fingerprint, slot.ttl_s, endpoint, body, model,
                                              job_id, **envelope)
        except NotReplicated:
            # Refused, so it should not run: withdraw it unless a worker took it already.
            with ignoring_redis_failures():
                await self.v2.cancel(job_id)
            raise
        if bound is None:
            return job_id, None
        bound_id, _, fingerprint = bound.decode().partition(" ")
        return bound_id, fingerprint

    async def resubmit(self, endpoint: JobKind, body: bytes, model: str, *, job_id: str,
                       **envelope: Any) -> None:
        """A retried submit of `job_id` (its Idempotency-Key is bound to it)
        under DERENDER_MIN_REPLICAS: enqueue it again if its first submit was
        refused (withdrawn for too few replicas), else leave it be; either way
        wait for the replicas, so the retry is acknowledged on the same terms as
        a first submit. Without replicas to wait for, a bound key always names a
        job that was stored and queued: nothing to do.

        Two retries racing could both enqueue the same id: one job, in the lane
        twice, answered once (the second finish finds its result written).
        """
        if not self.durability.replicas:
            return
        if not await self.v2.exists(job_id):
            await self.submit(endpoint, body, model, job_id=job_id, **envelope)
            return
        key = self.keys.job_v2(job_id)
        ttl = await self.redis.pttl(key)
        if ttl > 0:  # unchanged, but a write: the WAIT after it covers the job's own earlier writes
            await replicated(self.redis, self.durability, [("PEXPIRE", key, ttl)])

    async def cancel(self, job_id: str, model: str | None = None) -> bool:
        """Withdraw a job whose result is not written yet; True if it was withdrawn."""
        return await self.v2.cancel(job_id)

    async def discard_result(self, job_id: str) -> None:
        with ignoring_redis_failures():  # it expires by its TTL anyway
            await self.redis.delete(self.keys.job_v2(job_id))

    async def peek_result(self, job_id: str) -> tuple[ResultEnvelope, memoryview] | None:
        """Read a result and leave it until its TTL (`/v1/jobs`)."""
        return (await self.v2.read(job_id))[0]

    async def lookup(self, job_id: str) -> Lookup:
        """The result, or whether the job is still pending, in one GET: the
        job's key holds its pending marker, then its result."""
        return Lookup(*await self.v2.read(job_id))
