"""Whether a worker process is alive: its event loop runs, and every model's
job loop keeps taking jobs.

A process whose job loop died or hangs still answers HTTP from its metrics
thread and could keep heartbeating from the loop's other tasks; `/health`
(worker/http.py) and the heartbeat ask this object instead, so such a
process stops being listed and its liveness probe fails.

Each job loop reports progress with the longest quiet time it expects before
its next report (an idle loop blocks in BRPOP for `poll_delay_s`), or that it
is waiting for one of its own running jobs to free a slot (no deadline: the
jobs hold their leases). A loop that misses its deadline by `stall_s`, or has
ended, is a problem; so is an event loop whose lag sampler stopped ticking.
Waiting for Redis is accounted for too: the deadline counts from the last
time Redis itself was seen not answering (`redis_failed`, from a probe on a
connection of its own), so a Redis outage or stall is never called a stuck
worker (restarting it would not help), while a loop stuck with Redis
answering is.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

STALL_S = 10.0


class Liveness:
    """Written by the event loop, read by the metrics thread (hence the lock)."""

    def __init__(self, stall_s: float = STALL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.stall_s = stall_s
        self._clock = clock
        self._lock = threading.Lock()
        self._loop_tick = clock()
        self._due: dict[str, float] = {}
        self._ended: dict[str, str] = {}
        self._redis_failed = -math.inf
        self._beaten = -math.inf

    def loop_ticked(self) -> None:
        """The event loop ran a timer just now (metrics.sample_loop_lag)."""
        self._loop_tick = self._clock()

    def progress(self, job_loop: str, quiet_s: float = 0.0) -> None:
        """`job_loop` made progress now; it reports again within `quiet_s`."""
        with self._lock:
            self._due[job_loop] = self._clock() + quiet_s

    def waiting_for_jobs(self, job_loop: str) -> None:
        """`job_loop` waits for one of its running jobs to free a slot."""
        with self._lock:
            self._due[job_loop] = math.inf

    def redis_failed(self) -> None:
        """Redis did not answer a probe just now."""
        self._redis_failed = self._clock()

    def beaten(self, written: bool) -> None:
        """The heartbeat was written just now (or withdrawn, or it failed)."""
        if written:
            self._beaten = self._clock()

    def heartbeat_fresh(self, max_age_s: float) -> bool:
        """Whether the last heartbeat written is at most `max_age_s` old: a
        worker claims jobs only while others can see it alive."""
        return self._clock() - self._beaten <= max_age_s

    def ended(self, job_loop: str, reason: str) -> None:
        with self._lock:
            self._ended[job_loop] = reason

    def problems(self) -> list[str]:
        """Why this process is not alive; empty when it is."""
        now = self._clock()
        out = []
        if (stalled := now - self._loop_tick) >= self.stall_s:
            out.append(f"event loop stalled {stalled:.0f}s")
        with self._lock:
            due, ended = dict(self._due), dict(self._ended)
        for job_loop, reason in sorted(ended.items()):
            out.append(f"job loop {job_loop} ended: {reason}")
        for job_loop, deadline in sorted(due.items()):
            overdue = now - max(deadline, self._redis_failed)
            if job_loop not in ended and overdue >= self.stall_s:
                out.append(f"job loop {job_loop} stuck {overdue:.0f}s past its longest wait")
        return out

    def ok(self) -> bool:
        return not self.problems()
