"""This worker's last minute for the status page (derender_queue/wire/activity.py).

Once a second it reads what this process's Prometheus metrics counted since
the last look (jobs by outcome, tokens, the queue-wait histogram), keeps it
as that second's entry and, when it did anything, writes the window to the
worker's activity key (seconds that aged out are dropped then; the API reads
only the window, and the key expires a minute after its newest second). Nothing is added to the job path: jobs already
update those metrics. Memory: `WINDOW_S` entries. An idle worker writes
nothing; the task outlives every error (logged and counted).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from redis.asyncio import Redis

from derender_queue.wire.activity import TTL_MS, WINDOW_S, WorkerSecond, encode
from derender_queue.wire.failures import redis_failure
from derender_queue.wire.keys import Keys
from worker import metrics

log = logging.getLogger("derender.worker")


class Totals(NamedTuple):
    """This process's counters since it started."""

    jobs: int
    client_errors: int
    errors: int
    tokens: int
    wait: tuple[int, ...]
    """Jobs started per queue-wait bucket (not cumulative)."""


def totals() -> Totals:
    counts = metrics.job_counts()
    tokens = sum(s.value for f in metrics.TOKENS.collect() for s in f.samples if s.name.endswith("_total"))
    cumulative = [s.value for f in metrics.QUEUE_WAIT.collect() for s in f.samples if s.name.endswith("_bucket")]
    wait = tuple(int(b - a) for a, b in zip([0.0, *cumulative[:-1]], cumulative, strict=True))
    return Totals(sum(counts.values()), counts["client_error"], counts["error"], int(tokens), wait)


class Recorder:
    """The window of seconds, fed from successive `Totals`."""

    def __init__(self, read: Callable[[], Totals] = totals) -> None:
        self.read = read
        self.last = read()
        self.seconds: deque[WorkerSecond] = deque(maxlen=WINDOW_S)

    def sample(self, t: int) -> bool:
        """Put what was counted since the last sample in second `t` and drop
        seconds older than the window; True when second `t` saw any job."""
        now, last = self.read(), self.last
        self.last = now
        while self.seconds and self.seconds[0].t <= t - WINDOW_S:
            self.seconds.popleft()
        wait = [b - a for a, b in zip(last.wait, now.wait, strict=True)]
        jobs = now.jobs - last.jobs
        if not (jobs or any(wait)):
            return False
        self.seconds.append(WorkerSecond(t, jobs, now.client_errors - last.client_errors, now.errors - last.errors,
                                         now.tokens - last.tokens, wait))
        return True


async def publish_activity(redis: Redis, keys: Keys, worker_id: str, recorder: Recorder | None = None,
                           clock: Callable[[], float] = time.time) -> None:
    """Forever: just past each whole second, record the second that ended and
    write the window if that second saw jobs (a failed write is tried again
    next second)."""
    recorder = recorder or Recorder()
    key, unwritten = keys.activity(worker_id), False
    while True:
        now = clock()
        await asyncio.sleep(math.floor(now) + 1.01 - now)
        try:
            unwritten = recorder.sample(int(clock()) - 1) or unwritten
            if unwritten:
                await redis.set(key, encode(recorder.seconds), px=TTL_MS)
                unwritten = False
        except Exception as exc:
            if redis_failure(exc):
                continue  # Redis down: the job loop and the heartbeat say so; the window waits
            log.exception("publishing this worker's activity failed; trying again next second")
            metrics.ACTIVITY_ERRORS.inc()
