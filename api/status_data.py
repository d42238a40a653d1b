"""The status snapshot behind `GET /status` and `GET /status.json`.

It costs two Redis round trips whatever the key count: the live-worker
registry + one MGET of their heartbeats, and one pipeline of a ZCARD per
configured model; never a key scan. The rest is this
process's own memory (api/recent.py). With Redis down the page still renders,
saying so, with the last minute this API saw.
"""

from __future__ import annotations

import msgspec

from derender_queue.wire.failures import redis_failure
from derender_queue.wire.heartbeat import Heartbeat, live_workers
from derender_queue.wire.keys import now_ms

from .recent import WINDOW_S, RecentError, Second
from .state import ApiState


class WorkerRow(msgspec.Struct):
    id: str
    host: str
    pid: int
    models: dict[str, str]
    """Model served -> sha256 of its tokenizer.json."""
    heartbeat_age_s: float
    busy: int
    executors: int
    concurrency: int
    jobs_done: int
    client_errors: int
    errors: int
    started_ms: int


class QueueRow(msgspec.Struct):
    model: str
    depth: int | None
    """Jobs waiting (None: Redis unreachable)."""
    workers: int
    """Live workers serving this model."""


class Minute(msgspec.Struct):
    """This API's synchronous derender requests over the last `window_s`."""

    window_s: int
    requests: int
    requests_per_s: float
    errors: int
    p50_ms: float | None
    p99_ms: float | None


class Status(msgspec.Struct):
    generated_ms: int
    redis: str
    """"ok", or why it is unreachable."""
    api_started_ms: int
    workers: list[WorkerRow]
    queues: list[QueueRow]
    minute: Minute
    seconds: list[Second]
    """Per second of the window, oldest first: requests, errors, p50/p99 ms."""
    recent_errors: list[RecentError]
    """Newest first: error answers of the synchronous routes (no bodies)."""


def _worker_row(beat: Heartbeat, now: int) -> WorkerRow:
    return WorkerRow(beat.id, beat.host, beat.pid, beat.models, round(max(now - beat.beat_ms, 0) / 1000, 1),
                     beat.busy, beat.executors, beat.concurrency, beat.jobs_done, beat.client_errors, beat.errors,
                     beat.started_ms)


async def _read_redis(state: ApiState) -> tuple[str, list[Heartbeat], list[int | None]]:
    try:
        beats = await live_workers(state.redis, state.keys)
        depths: list[int | None] = [await state.queue.depth(model) for model in state.model_names]
    except Exception as exc:
        if not redis_failure(exc):
            raise
        return f"unreachable: {type(exc).__name__}", [], [None] * len(state.model_names)
    return "ok", beats, depths


async def snapshot(state: ApiState) -> Status:
    redis, beats, depths = await _read_redis(state)
    now = now_ms()
    seconds = state.recent.seconds()
    requests, p50, p99 = state.recent.minute()
    minute = Minute(WINDOW_S, requests, round(requests / WINDOW_S, 2), sum(s.errors for s in seconds), p50, p99)
    queues = [QueueRow(m, d, sum(m in b.models for b in beats))
              for m, d in zip(state.model_names, depths, strict=True)]
    workers = sorted((_worker_row(b, now) for b in beats), key=lambda w: (w.host, w.id))
    return Status(now, redis, state.started_ms, workers, queues, minute, seconds, list(reversed(state.recent.errors)))
