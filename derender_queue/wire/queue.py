"""Producer-side queue operations, shared by the HTTP API and the Python
client (wire/lanes.py has a job's lifecycle; docs/wire-format.md).

Around the submit itself: an idempotency slot bound in the script that
enqueues its job (so a slot never names a job that was not stored and queued,
whatever happens to the connection), a retried submit under
DERENDER_MIN_REPLICAS, a withdraw, and one atomic read of a job's state.

Dynamic batching (DERENDER_BATCHING, on by default): a small job submitted
while an earlier submit for its lane is still in flight waits for that one
and goes with every other job that arrived meanwhile, as one batch value (one
LPUSH, one claim, one finish). An idle producer sends at once, so batching
adds no latency; under load it turns many round trips into one. Each job
keeps its own key, deadline and owner: it is cancelled, expires and fails
alone, and a batch whose worker died goes back to the lane split (RECOVER).
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis

from derender_queue.contract.types import JobKind

from .background import spawn
from .cluster import CLUSTER_SHARDS, SHARD, is_cluster, tags_for
from .depth import queue_depth
from .envelope import JobEnvelope, ResultEnvelope, WireError, pack, peek_job, result_view
from .failures import ignoring_redis_failures
from .frames import BATCH_MARK, FRAME_ITEMS
from .keys import Keys, new_job_id, now_ms, shard_of, tag_in
from .lanes import PENDING, Scripts, pack_batch, replicated
from .replication import MASTER_ONLY, Durability, NotReplicated

log = logging.getLogger("derender.queue")
WIRE_VERSION = 2
"""The envelope's `v` (wire format v1 was removed in 0.2.0)."""
LIGHT_BODY_BYTES = 32 * 1024
"""Bodies this small (a short generation or a stream chunk) run on the light thread."""
BATCH_ITEMS = FRAME_ITEMS
BATCH_BYTES = 256 * 1024
"""A batch holds at most this many jobs, and this many bytes of small ones."""
SMALL_JOB_BYTES = 32 * 1024
"""Larger job values are never batched and go to the heavy lane."""


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


@dataclass
class _Lane:
    """A lane's submits: whether one is in flight, and the jobs waiting for it."""

    busy: bool = False
    waiting: list[tuple[str, bytes, bytes, asyncio.Future[None]]] = field(default_factory=list)


class JobQueue:
    def __init__(self, redis: Redis, keys: Keys, job_ttl_ms: int = 3_600_000, durability: Durability = MASTER_ONLY,
                 batching: bool = True, shards: int = CLUSTER_SHARDS) -> None:
        self.redis = redis
        self.keys = keys
        self.job_ttl_ms = job_ttl_ms
        self.durability = durability
        """Replicas a submit waits for (DERENDER_MIN_REPLICAS): NotReplicated if too few."""
        self.batching = batching
        self.cluster = is_cluster(redis)
        self.tags = tags_for(redis, shards)
        self._turn = random.randrange(len(self.tags)) - 1
        """The shard whose turn it was: a random one, so that many producers
        (each taking the shards in turn from its own start) spread their
        first jobs over every shard, not all on the first ones."""
        self._filling: str | None = None
        """The shard whose submit in flight new jobs join (batching): one at a
        time, the next in turn once its batch goes, so a cluster's producers
        batch as on one Redis and still spread their load over the shards."""
        self.scripts = Scripts(redis)
        self._lanes: dict[str, _Lane] = {}
        self._flushes: set[asyncio.Task[None]] = set()

    def new_id(self, tag: str | None = None) -> str:
        """A job id of shard `tag`; else of the shard whose submit in flight it
        can join, or of the next shard in turn (a batch holds one shard's jobs)."""
        if tag is None and self.batching:
            tag = self._filling
        if tag is None:
            self._turn = (self._turn + 1) % len(self.tags)
            tag = self.tags[self._turn]
        return new_job_id(tag)

    def idempotency_key(self, scope: str, key_hash: str) -> str:
        """An Idempotency-Key's slot: in the shard its hash names, where its job
        goes too (`id_for_slot`), so the script that binds them runs in one slot."""
        return self.keys.idempotency(self.tags[int(key_hash[:8], 16) % len(self.tags)], scope, key_hash)

    def id_for_slot(self, slot_key: str) -> str:
        """A new job id for the job an idempotency slot will bind (of the slot's shard)."""
        return self.new_id(tag_in(slot_key))

    async def depth(self, model: str) -> int:
        return await queue_depth(self.redis, self.keys, model, self.tags)

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
        job_id = job_id or (self.id_for_slot(slot.key) if slot else self.new_id())
        try:
            if slot is None:
                await self._enqueue(endpoint, body, model, job_id, envelope)
                return job_id, None
            bound = await self._bind_and_enqueue(slot, endpoint, body, model, job_id, envelope)
        except NotReplicated:
            # Refused, so it should not run: withdraw it unless a worker took it already.
            with ignoring_redis_failures():
                await self.cancel(job_id)
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
        key = self.keys.job(job_id)
        if not await self.redis.exists(key):
            await self.submit(endpoint, body, model, job_id=job_id, **envelope)
            return
        ttl = await self.redis.pttl(key)
        if ttl > 0:  # unchanged, but a write: the WAIT after it covers the job's own earlier writes
            await replicated(self.redis, self.durability, [("PEXPIRE", key, ttl)])

    async def cancel(self, job_id: str, model: str | None = None) -> bool:
        """Withdraw a job: True if it was pending, and its result is never
        written (a worker that holds it already finds no key and writes
        nothing). A result already there is deleted unread. One MULTI, no Lua:
        a producer's Redis user may run no scripts (docs/security.md)."""
        key = self.keys.job(job_id)
        if self.cluster:  # no MULTI there: the same two commands in a script
            return bool(await self.scripts.cancel(keys=[key]) == PENDING)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.getrange(key, 0, 0)
            pipe.delete(key)
            head, _ = await pipe.execute()
        return bool(head == PENDING)

    async def discard_result(self, job_id: str) -> None:
        with ignoring_redis_failures():  # it expires by its TTL anyway
            await self.redis.delete(self.keys.job(job_id))

    async def lookup(self, job_id: str) -> Lookup:
        """The result, or whether the job is still pending, in one GET: the
        job's key holds its pending marker, then its result."""
        value = await self.redis.get(self.keys.job(job_id))
        if value is None:
            return Lookup(None, False, None)
        if value.startswith(PENDING):
            return Lookup(None, True, peek_job(value[1:]))
        try:
            return Lookup(result_view(value), False, None)
        except WireError as exc:  # not ours to serve: someone wrote garbage there
            log.warning("unreadable result for job %s: %s", job_id, exc, extra={"job_id": job_id})
            return Lookup(None, False, None)

    def _values(self, endpoint: JobKind, body: bytes, model: str, job_id: str,
                envelope: dict[str, Any]) -> tuple[bytes, bytes]:
        """(the job key's pending value, the lane value)."""
        head = pack(JobEnvelope(v=WIRE_VERSION, id=job_id, endpoint=endpoint, model=model, enqueued_ms=now_ms(),
                                **envelope), b"")
        return PENDING + head, head + body

    def _lane(self, tag: str, model: str, value: bytes) -> str:
        """Where a job (or batch) value goes: heavy ones have a lane of their
        own, so light ones never queue behind them (a batch is always light)."""
        heavy = len(value) > SMALL_JOB_BYTES and not value.startswith(BATCH_MARK)
        return self.keys.heavy_lane(tag, model) if heavy else self.keys.lane(tag, model)

    async def _bind_and_enqueue(self, slot: Slot, endpoint: JobKind, body: bytes, model: str, job_id: str,
                                envelope: dict[str, Any]) -> bytes | None:
        """Bind the idempotency slot and enqueue in one script; the slot's
        value ("job-id fingerprint") instead when it was bound already."""
        tag = shard_of(job_id) or SHARD
        pending, value = self._values(endpoint, body, model, job_id, envelope)
        script = self.scripts.submit_once
        (bound,) = await replicated(self.redis, self.durability, [
            ("EVALSHA", script.sha, 3, slot.key, self.keys.job(job_id), self._lane(tag, model, value),
             f"{job_id} {slot.fingerprint}", slot.ttl_s, pending, self.job_ttl_ms, value),
        ], script)
        return bound if isinstance(bound, bytes) else None

    async def _enqueue(self, endpoint: JobKind, body: bytes, model: str, job_id: str,
                       envelope: dict[str, Any]) -> None:
        tag = shard_of(job_id) or SHARD
        lane = self.keys.lane(tag, model)
        pending, value = self._values(endpoint, body, model, job_id, envelope)
        state = self._lanes.setdefault(lane, _Lane())
        if not self.batching or len(value) > SMALL_JOB_BYTES:
            await self._send(tag, model, [(job_id, pending, value)])
        elif state.busy:  # wait for the submit in flight, then go with the others
            done = asyncio.get_running_loop().create_future()
            state.waiting.append((job_id, pending, value, done))
            await done
        else:
            state.busy = True
            self._filling = tag
            try:
                await self._send(tag, model, [(job_id, pending, value)])
            finally:
                self._flush_later(tag, model, state)

    async def _send(self, tag: str, model: str, jobs: list[tuple[str, bytes, bytes]]) -> None:
        """One round trip: each job's pending marker first, so a worker that
        finishes at once finds the key its result replaces (SET ... XX)."""
        commands: list[tuple[Any, ...]] = [("SET", self.keys.job(job_id), pending, "PX", self.job_ttl_ms)
                                           for job_id, pending, _ in jobs]
        if len(jobs) > 1:
            commands.append(("INCRBY", self.keys.batched(tag, model), len(jobs) - 1))
        value = jobs[0][2] if len(jobs) == 1 else pack_batch([v for _, _, v in jobs])
        commands.append(("LPUSH", self._lane(tag, model, value), value))
        await replicated(self.redis, self.durability, commands)

    def _flush_later(self, tag: str, model: str, state: _Lane) -> None:
        self._filling = None if self._filling == tag else self._filling  # its batch goes now: the next shard's turn
        if not state.waiting:
            state.busy = False
            return
        spawn(self._flush(tag, model, state), "batch-flush", None, self._flushes)

    async def _flush(self, tag: str, model: str, state: _Lane) -> None:
        """Send the jobs that waited, batch after batch, until none wait."""
        try:
            while state.waiting:
                batch: list[tuple[str, bytes, bytes, asyncio.Future[None]]] = []
                size = 0
                while state.waiting and len(batch) < BATCH_ITEMS and size < BATCH_BYTES:
                    job = state.waiting.pop(0)
                    if not job[3].cancelled():  # its caller left before it was sent
                        batch.append(job)
                        size += len(job[2])
                if not batch:
                    continue
                try:
                    await self._send(tag, model, [(job_id, pending, value) for job_id, pending, value, _ in batch])
                except Exception as exc:  # each waiting caller gets the error its own submit would
                    for *_, done in batch:
                        if not done.done():
                            done.set_exception(exc)
                    continue
                for *_, done in batch:
                    if not done.done():
                        done.set_result(None)
        finally:
            state.busy = False
            for *_, done in state.waiting:  # cancelled (shutdown): nobody will send them
                if not done.done():
                    done.set_exception(ConnectionError("the batched submit was abandoned"))
            state.waiting.clear()
