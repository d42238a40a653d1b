"""arq as the worker runtime, through its public API: one `arq.Worker` per model.

This is the one module that imports arq (an import-linter contract). What it
uses, all of it public (checked against arq 0.28.0; tests/worker/test_arq_worker.py
checks each as behaviour, so an arq release that changes one fails a test):

- `Worker(...)`: `max_jobs`, `poll_delay`, `job_completion_wait`, `ctx`,
  `handle_signals=False` (one process runs a worker per model: the signals
  are worker/main.py's), and one registered function, which arq requires;
- `Worker.async_run()`, which runs `main()` as the worker's main task;
- `Worker.main()`, overridden: arq's own polls its sorted-set queue every
  `poll_delay` and claims a job in four round trips (bench/arq_spike.py);
  ours runs wire format v2's claim loops instead (worker/lane_server.py: one
  blocking BLMOVE per claim), and the sweep that answers what a v1 producer
  left (worker/v1_leftovers.py). arq has no hook for a job source of one's
  own, so `main()` is the piece replaced; nothing private is;
- `Worker.tasks` and `allow_pick_jobs`: the lanes put each running job in
  `tasks` and stop claiming once `allow_pick_jobs` is False;
  `Worker.handle_sig_wait_for_completion()` (worker/main.py, on SIGTERM) sets
  it, waits up to `job_completion_wait` for `tasks`, then cancels the rest
  and the main task: the drain.

arq's concurrency semaphore and job counter belong to its poll loop, which
never runs: the lanes count their own (`LaneServer.permits`). No arq key is
written (its health line is not, nor its job, result and retry keys), so no
arq constant needs rebinding.
"""

from __future__ import annotations

import asyncio
from typing import Any

from arq.worker import Worker, func
from redis.asyncio import Redis

from derender_queue.wire.cluster import SHARD
from derender_queue.wire.keys import Keys
from worker.lane_server import lane_tasks
from worker.liveness import Liveness
from worker.v1_leftovers import answer_v1_leftovers

ARQ_VERSION_CHECKED = "0.28.0"


async def _never_enqueued(ctx: dict[str, Any]) -> None:
    """arq wants one function registered; jobs come from the lanes, never from arq's queue."""


class DerenderWorker(Worker):
    """An arq worker for one model's lanes (a `LaneHost`)."""

    def __init__(self, *, keys: Keys, model: str, pool: Redis, liveness: Liveness | None = None,
                 recover_every_s: float = 2.0, tags: tuple[str, ...] = (SHARD,), **kwargs: Any) -> None:
        super().__init__(
            functions=(func(_never_enqueued, name="derender"),),
            queue_name=keys.lane(tags[0], model),
            redis_pool=pool,  # type: ignore[arg-type]  # arq sends it no command (main() is ours)
            handle_signals=False,
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
        # In place of arq's main() (its INFO log line, on_startup hook and poll loop).
        tasks = lane_tasks(self)
        if not self.keys.cluster:  # v1 never ran on a cluster
            sweep = answer_v1_leftovers(self.ctx["runtime"], self.model, self.recover_every_s)
            tasks.append(asyncio.create_task(sweep, name=f"v1-leftovers-{self.model}"))
        try:
            await asyncio.gather(*tasks)  # they end only when cancelled (shutdown)
        finally:
            for task in tasks:
                task.cancel()
