"""Producer-side operations of wire format v2 (wire/lanes.py has the lifecycle).

`JobQueue` (wire/queue.py) hands v2 job ids here, and new submits when the
producer writes v2 (DERENDER_WIRE_FORMAT=2).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable
from typing import Any, cast

from redis.asyncio import Redis
from redis.exceptions import RedisError

from derender_queue.contract import JobKind

from .envelope import JobEnvelope, ResultEnvelope, WireError, pack, peek_job, unpack_result
from .keys import Keys, new_job_id_v2, now_ms, shard_of
from .lanes import PENDING, Scripts, replicated
from .replication import Durability

log = logging.getLogger("derender.queue")
VERSION_2 = 2
SHARD = "s0"
"""One shard until Redis Cluster (issue 17) spreads lanes over several."""


class LaneQueue:
    def __init__(self, redis: Redis, keys: Keys, job_ttl_ms: int, durability: Durability) -> None:
        self.redis = redis
        self.keys = keys
        self.job_ttl_ms = job_ttl_ms
        self.durability = durability
        self.scripts = Scripts(redis)

    @staticmethod
    def new_id() -> str:
        return new_job_id_v2(SHARD)

    def _values(self, endpoint: JobKind, body: bytes, model: str, job_id: str,
                envelope: dict[str, Any]) -> tuple[bytes, bytes]:
        """(the job key's pending value, the lane value)."""
        head = pack(JobEnvelope(v=VERSION_2, id=job_id, endpoint=endpoint, model=model, enqueued_ms=now_ms(),
                                **envelope), b"")
        return PENDING + head, head + body

    async def submit(self, endpoint: JobKind, body: bytes, model: str, job_id: str, **envelope: Any) -> str:
        """One round trip: the pending marker first, so a worker that finishes
        at once finds the key its result replaces (SET ... XX)."""
        tag = shard_of(job_id) or SHARD
        pending, value = self._values(endpoint, body, model, job_id, envelope)
        await replicated(self.redis, self.durability, [
            ("SET", self.keys.job_v2(job_id), pending, "PX", self.job_ttl_ms),
            ("LPUSH", self.keys.lane(tag, model), value),
        ])
        return job_id

    async def submit_once(self, slot_key: str, fingerprint: str, ttl_s: int, endpoint: JobKind, body: bytes,
                          model: str, job_id: str, **envelope: Any) -> bytes | None:
        """Bind the idempotency slot and enqueue in one script; the slot's
        value ("job-id fingerprint") instead when it was bound already."""
        tag = shard_of(job_id) or SHARD
        pending, value = self._values(endpoint, body, model, job_id, envelope)
        script = self.scripts.submit_once
        (bound,) = await replicated(self.redis, self.durability, [
            ("EVALSHA", script.sha, 3, slot_key, self.keys.job_v2(job_id), self.keys.lane(tag, model),
             f"{job_id} {fingerprint}", ttl_s, pending, self.job_ttl_ms, value),
        ], script)
        return bound if isinstance(bound, bytes) else None

    def slot_key(self, scope: str, key_hash: str) -> str:
        return self.keys.idempotency_v2(SHARD, scope, key_hash)

    async def exists(self, job_id: str) -> bool:
        return bool(await self.redis.exists(self.keys.job_v2(job_id)))

    async def cancel(self, job_id: str) -> bool:
        """Withdraw a pending job: its result is never written. A worker may
        hold it already: its finish then finds no job and writes nothing."""
        return bool(await self.scripts.cancel(keys=[self.keys.job_v2(job_id)]))

    async def discard_result(self, job_id: str) -> None:
        with contextlib.suppress(RedisError, OSError):  # it expires by its TTL anyway
            await self.redis.delete(self.keys.job_v2(job_id))

    async def read(self, job_id: str) -> tuple[tuple[ResultEnvelope, bytes] | None, bool, JobEnvelope | None]:
        """(result, pending, the pending job's envelope) in one GET."""
        value = await self.redis.get(self.keys.job_v2(job_id))
        if value is None:
            return None, False, None
        if value.startswith(PENDING):
            return None, True, peek_job(value[1:])
        try:
            return unpack_result(value), False, None
        except WireError as exc:  # not ours to serve: someone wrote garbage there
            log.warning("unreadable result for job %s: %s", job_id, exc, extra={"job_id": job_id})
            return None, False, None

    async def depth(self, model: str) -> int:
        depth = await cast(Awaitable[int], self.redis.llen(self.keys.lane(SHARD, model)))
        return depth
