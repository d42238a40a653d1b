"""What the workers did over the last minute, for the status page: every job,
whoever sent it (this API, another, `/v1/jobs`, SSE chunks, engine steps,
producers on Redis), from the activity each live worker publishes
(derender_queue/wire/activity.py), summed per second; and each worker's
recent rates.

A worker writes a second once it has ended, so the window ends `LAG_S`
seconds ago: the newest second is then there for every worker. The sums
change once a second, so each API process computes them at most that often,
however many pages are open (`ApiState.workload`).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from derender_queue.wire.activity import WAIT_BOUNDS_S, WINDOW_S, WorkerSecond, wait_quantile_ms

LAG_S = 2
RATE_WINDOW_S = 10
"""A worker's jobs/s and tokens/s are over its last this many seconds."""


class SystemSecond(msgspec.Struct):
    t: int
    """Unix second."""
    jobs: int
    errors: int
    """Jobs answered 4xx or 5xx."""
    tokens: int
    wait_p50_ms: float | None
    wait_p99_ms: float | None
    """Queue wait (enqueue to start) of the jobs started in this second."""


class SystemMinute(msgspec.Struct):
    """All live workers over the window."""

    window_s: int
    jobs: int
    jobs_per_s: float
    client_errors: int
    errors: int
    tokens: int
    tokens_per_s: float
    wait_p50_ms: float | None
    wait_p99_ms: float | None


class WorkerRates(msgspec.Struct):
    jobs_per_s: float
    tokens_per_s: float
    wait_p50_ms: float | None


def _sum(seconds: Iterable[WorkerSecond], t: int) -> WorkerSecond:
    rows = list(seconds)
    wait = [sum(column) for column in zip(*(s.wait for s in rows), strict=True)] or [0] * (len(WAIT_BOUNDS_S) + 1)
    return WorkerSecond(t, sum(s.jobs for s in rows), sum(s.client_errors for s in rows),
                        sum(s.errors for s in rows), sum(s.tokens for s in rows), wait)


def system(activity: dict[str, list[WorkerSecond]], now_s: int) -> tuple[SystemMinute, list[SystemSecond]]:
    """The window's totals and its seconds, oldest first (empty ones as zeros)."""
    first = now_s - LAG_S - WINDOW_S + 1
    by_second: dict[int, list[WorkerSecond]] = {}
    for seconds in activity.values():
        for s in seconds:
            if first <= s.t <= now_s - LAG_S:
                by_second.setdefault(s.t, []).append(s)
    sums = [_sum(by_second.get(t, ()), t) for t in range(first, now_s - LAG_S + 1)]
    out = [SystemSecond(s.t, s.jobs, s.client_errors + s.errors, s.tokens, wait_quantile_ms(s.wait, 0.5),
                        wait_quantile_ms(s.wait, 0.99)) for s in sums]
    whole = _sum(sums, first)
    minute = SystemMinute(WINDOW_S, whole.jobs, round(whole.jobs / WINDOW_S, 2), whole.client_errors, whole.errors,
                          whole.tokens, round(whole.tokens / WINDOW_S, 1), wait_quantile_ms(whole.wait, 0.5),
                          wait_quantile_ms(whole.wait, 0.99))
    return minute, out


def rates(seconds: list[WorkerSecond], now_s: int) -> WorkerRates:
    """One worker over its last `RATE_WINDOW_S` seconds."""
    recent = _sum((s for s in seconds if now_s - LAG_S - RATE_WINDOW_S < s.t <= now_s - LAG_S), now_s)
    return WorkerRates(round(recent.jobs / RATE_WINDOW_S, 1), round(recent.tokens / RATE_WINDOW_S, 1),
                       wait_quantile_ms(recent.wait, 0.5))


class Totals(msgspec.Struct):
    """The window's sums and each worker's rates, as of one second."""

    now_s: int
    minute: SystemMinute
    seconds: list[SystemSecond]
    workers: dict[str, WorkerRates]


def totals(activity: dict[str, list[WorkerSecond]], now_s: int) -> Totals:
    minute, seconds = system(activity, now_s)
    return Totals(now_s, minute, seconds, {w: rates(s, now_s) for w, s in activity.items()})
