"""What the claim loops (worker/lane_server.py) need of the worker that runs
them: a protocol, so the lanes know nothing of arq or of the worker class
(worker/queue_worker.py's `DerenderWorker` is one; tests pass stand-ins)."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from redis.asyncio import Redis

from derender_queue.wire.keys import Keys
from worker.liveness import Liveness


class LaneHost(Protocol):
    """What the lanes need of the worker that runs them (worker/queue_worker.py)."""

    ctx: dict[Any, Any]
    """`ctx["runtime"]`: the JobRuntime that runs and finishes a job."""
    keys: Keys
    model: str
    tags: tuple[str, ...]
    max_jobs: int
    """Light jobs at once (DERENDER_CONCURRENCY); heavy ones get half as many."""
    poll_delay_s: float
    """The longest a claim blocks."""
    recover_every_s: float
    liveness: Liveness
    allow_pick_jobs: bool
    """False once the worker stops taking jobs (SIGTERM)."""
    tasks: dict[str, asyncio.Task[Any]]
    """Where the running jobs go: shutdown waits for them."""

    @property
    def pool(self) -> Redis: ...
