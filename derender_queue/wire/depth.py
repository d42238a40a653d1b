"""Queue depth: the jobs waiting for a model, as admission (the API's 429)
and `derender_queue_depth` count them.

The lanes hold job values and batch frames, so a lane's depth is its length plus its batched counter (the jobs in its
batches beyond one per batch). Producers may INCRBY that counter
(docs/security.md) to any value; it is read here clamped to what the lane's
values could hold, so no value of it blocks admission.
"""

from __future__ import annotations

from prometheus_client import Gauge
from redis.asyncio import Redis

from .cluster import SHARD
from .frames import FRAME_ITEMS
from .keys import Keys

QUEUE_DEPTH = Gauge("derender_queue_depth", "Jobs waiting in a model's queue.", ["model"])
"""Exported by the API and by workers (one registry when `derender run` hosts both)."""


async def queue_depth(redis: Redis, keys: Keys, model: str, tags: tuple[str, ...] = (SHARD,)) -> int:
    """Jobs queued for `model` in the lanes of every shard, each batch counted
    by its jobs (a batch being run counts until it is done)."""
    async with redis.pipeline(transaction=False) as pipe:
        for tag in tags:
            pipe.llen(keys.lane(tag, model))
            pipe.llen(keys.heavy_lane(tag, model))
            pipe.get(keys.batched(tag, model))
            pipe.scard(keys.claims(tag))
        counts = await pipe.execute()
    lanes = 0
    for light, heavy, batched, claims in zip(*[iter(counts)] * 4, strict=True):
        lanes += int(light) + int(heavy) + batched_jobs(batched, int(light) + int(claims))
    return lanes


def batched_jobs(counter: bytes | None, values: int) -> int:
    """A lane's batched counter as queue depth counts it. Producers may INCRBY it
    to anything (docs/security.md), so it counts at most FRAME_ITEMS - 1 jobs for
    each of `values` (the lane's values and the claim slots that may hold a
    batch), never below 0; the workers bring the counter itself back into that
    range every heartbeat (wire/lanes.py SETTLE)."""
    try:
        count = int(counter or 0)
    except ValueError:
        return 0
    return min(max(count, 0), (FRAME_ITEMS - 1) * values)
