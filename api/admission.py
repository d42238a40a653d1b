"""Backpressure: above `DERENDER_MAX_QUEUE_DEPTH` queued jobs a model's
requests are refused (429) instead of queueing without bound."""

from __future__ import annotations

from dataclasses import dataclass, field

from derender_queue.errors import DerenderError

from . import metrics


@dataclass
class Admission:
    limit: int = 0
    """0: no limit."""
    depth: dict[str, int] = field(default_factory=dict)
    """Queue depth per model, refreshed every heartbeat interval (api/watcher.py)."""
    since_refresh: dict[str, int] = field(default_factory=dict)
    """Jobs this process enqueued since the last refresh."""

    def admit(self, model: str) -> None:
        if not self.limit:
            return
        depth = self.depth.get(model, 0) + self.since_refresh.get(model, 0)
        if depth >= self.limit:
            metrics.REJECTED.labels("queue_full").inc()
            raise DerenderError(f"queue for `{model}` is full ({depth} jobs waiting); retry later", status=429)
        self.since_refresh[model] = self.since_refresh.get(model, 0) + 1

    def refresh(self, model: str, depth: int) -> None:
        self.depth[model] = depth
        self.since_refresh[model] = 0
