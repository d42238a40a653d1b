"""arq, extended: one worker per model, claiming wire format v2's lanes.

Stock arq 0.28 polls a sorted set every `poll_delay` (0.5 s) and pickles
jobs (bench/arq_spike.py). `DerenderWorker` keeps arq's worker lifecycle
(its concurrency, its task table that shutdown drains) and replaces its poll
loop by v2's claim loops (worker/lane_server.py: one blocking BLMOVE per
claim, no polling), plus a sweep that answers jobs an old (v1) producer left
in Redis (worker/v1_leftovers.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import Redis

from derender_queue.wire.keys import Keys
from derender_queue.wire.queue_v2 import SHARD
from worker.arq_adapter import ArqWorker, func
from worker.lane_server import lane_tasks
from worker.liveness import Liveness
from worker.v1_leftovers import answer_v1_leftovers


async def _never_enqueued(ctx: dict[str, Any]) -> None:
    """arq wants one function registered; jobs come from the lanes, not from arq's queue."""


class DerenderWorker(ArqWorker):
    """An arq worker for one model's lanes."""

    def __init__(self, *, keys: Keys, model: str, pool: Redis, liveness: Liveness | None = None,
                 recover_every_s: float = 2.0, tags: tuple[str, ...] = (SHARD,), **kwargs: Any) -> None:
        super().__init__(
            functions=(func(_never_enqueued, name="derender"),),
            queue_name=keys.lane(tags[0], model),
            redis_pool=pool,  # type: ignore[arg-type]  # arq sends it no command of its own (main() is ours)
            handle_signals=False,  # one process may run several workers: signals are ours
            **kwargs,
        )
        self.keys = keys
        self.model = model
        self.liveness = liveness or Liveness()
        self.recover_every_s = recover_every_s
        """How often the lanes look for dead workers' jobs."""
        self.tags = tags
        """The shards this worker claims from: one on a single Redis, every shard of a Redis Cluster."""

    async def main(self) -> None:
        # arq's main() minus its INFO log line (fakeredis has no INFO) and its poll loop.
        self.ctx["redis"] = self.pool
        if self.on_startup:
            await self.on_startup(self.ctx)
        tasks = lane_tasks(self, self.recover_every_s)
        if not self.keys.cluster:  # v1 never ran on a cluster
            sweep = answer_v1_leftovers(self.ctx["runtime"], self.model, self.recover_every_s)
            tasks.append(asyncio.create_task(sweep, name=f"v1-leftovers-{self.model}"))
        try:
            await asyncio.gather(*tasks)  # they end only when cancelled (shutdown)
        finally:
            for task in tasks:
                task.cancel()
