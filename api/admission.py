"""Backpressure: above `DERENDER_MAX_QUEUE_DEPTH` queued jobs a model's
requests are refused (429) instead of queueing without bound.

The depth is the queue's real size: the watcher's last reading plus the jobs
this process enqueued since is only an upper bound (most of those jobs may
have finished already), so when that estimate reaches the limit the queue is
read again before anyone is refused. Far from the limit, admission costs
nothing; near it, one read of the lanes' depth (`wire/depth.py`: a pipeline
of LLENs and batched counters, one round trip).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from derender_queue.errors import DerenderError

from . import metrics


@dataclass
class Admission:
    limit: int
    """0: no limit."""
    read_depth: Callable[[str], Awaitable[int]]
    """The queue's real depth now (one Redis round trip)."""
    depth: dict[str, int] = field(default_factory=dict)
    """Queue depth per model, refreshed every heartbeat interval (api/watcher.py)."""
    since_refresh: dict[str, int] = field(default_factory=dict)
    """Jobs this process enqueued since the last refresh."""

    async def admit(self, model: str) -> None:
        if not self.limit:
            return
        if self.depth.get(model, 0) + self.since_refresh.get(model, 0) >= self.limit:
            self.refresh(model, await self.read_depth(model))
            depth = self.depth[model]
            if depth >= self.limit:
                metrics.REJECTED.labels("queue_full").inc()
                raise DerenderError(f"queue for `{model}` is full ({depth} jobs waiting); retry later", status=429)
        self.since_refresh[model] = self.since_refresh.get(model, 0) + 1

    def refresh(self, model: str, depth: int) -> None:
        self.depth[model] = depth
        self.since_refresh[model] = 0
