"""What each worker did over the last minute, second by second, for the status
page: every job it finished, whoever sent it (the API's routes, `/v1/jobs`,
SSE chunks, engine steps, producers on Redis).

A worker keeps `WINDOW_S` seconds of counters (jobs, 4xx, 5xx, tokens, a
queue-wait histogram) and writes them, after each second that saw jobs, to
`{p}:activity:{worker}` beside its heartbeat; the API reads the live workers'
keys with one MGET. Only seconds with jobs are kept, so an idle worker writes
nothing and a busy one at most `WINDOW_S` seconds of counters.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import msgspec
from redis.asyncio import Redis

from .keys import Keys

WINDOW_S = 60
WAIT_BOUNDS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
"""Queue-wait histogram upper bounds (the worker's Prometheus buckets); one
more bucket holds everything above the last."""
TTL_MS = (WINDOW_S + 5) * 1000
"""A worker's key outlives its newest second by the window: then it says nothing."""


class WorkerSecond(msgspec.Struct, array_like=True):
    """One second of one worker (or of all of them, summed)."""

    t: int
    """Unix second."""
    jobs: int
    client_errors: int
    """Jobs answered 4xx."""
    errors: int
    """Jobs answered 5xx."""
    tokens: int
    """Completion tokens derendered."""
    wait: list[int]
    """Jobs started, by queue wait (enqueue to start): counts per `WAIT_BOUNDS_S` bucket."""


class Activity(msgspec.Struct):
    seconds: list[WorkerSecond]
    """Oldest first; only seconds in which the worker finished or started a job."""


_decode = msgspec.json.Decoder(Activity)


def encode(seconds: Sequence[WorkerSecond]) -> bytes:
    return msgspec.json.encode(Activity(list(seconds)))


async def read_activity(redis: Redis, keys: Keys, worker_ids: Sequence[str]) -> dict[str, list[WorkerSecond]]:
    """The seconds each worker published (none for a worker with no key, or
    one this version cannot decode: a stranger must not blind the page)."""
    if not worker_ids:
        return {}
    out: dict[str, list[WorkerSecond]] = {}
    for worker_id, value in zip(worker_ids, await redis.mget([keys.activity(w) for w in worker_ids]), strict=True):
        if value:
            with contextlib.suppress(msgspec.MsgspecError):
                out[worker_id] = [s for s in _decode.decode(value).seconds if len(s.wait) == len(WAIT_BOUNDS_S) + 1]
    return out


def wait_quantile_ms(hist: Sequence[int], q: float) -> float | None:
    """The q-quantile of a queue-wait histogram, interpolated linearly inside
    its bucket (as Prometheus' histogram_quantile); None without jobs."""
    total = sum(hist)
    if not total:
        return None
    rank = q * total
    seen = 0
    for i, n in enumerate(hist):
        if n and seen + n >= rank:
            if i == len(WAIT_BOUNDS_S):  # above the last bound: say the bound
                return WAIT_BOUNDS_S[-1] * 1000
            low = WAIT_BOUNDS_S[i - 1] if i else 0.0
            return round((low + (WAIT_BOUNDS_S[i] - low) * (rank - seen) / n) * 1000, 2)
        seen += n
    return None  # unreachable: the counts sum to total
