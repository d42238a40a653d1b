"""The status snapshot behind `GET /status` and `GET /status.json`.

It costs three Redis round trips, then a pipeline per configured model,
whatever the key count: the live-worker registry, one MGET of their
heartbeats, one MGET of their activity (what each did over the last minute,
api/workload.py), and each model's queue depth; never a key scan. The rest
is this process's own memory (api/recent.py). With Redis down the page still
renders, saying so, with the last minute this API saw.

Who sees what: every caller sees the workers, queues and totals; recent
errors (job ids, messages) only its own, unless it is an operator
(`DERENDER_OPERATOR_KEYS`) or the API has no keys (then nobody is told apart).
"""

from __future__ import annotations

import msgspec

from derender_queue.wire.activity import read_activity
from derender_queue.wire.failures import redis_failure
from derender_queue.wire.heartbeat import Heartbeat, live_workers
from derender_queue.wire.keys import now_ms

from .recent import WINDOW_S, RecentError, Second
from .state import ApiState
from .workload import SystemMinute, SystemSecond, Totals, WorkerRates, totals


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
    jobs_per_s: float = 0.0
    """Over its last 10 s (api/workload.py)."""
    tokens_per_s: float = 0.0
    wait_p50_ms: float | None = None
    """Median queue wait of the jobs it started in its last 10 s."""


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
    viewer: str | None
    """Whose errors `recent_errors` holds: an API key's name, or None for every client's."""
    workers: list[WorkerRow]
    queues: list[QueueRow]
    system: SystemMinute
    """Every job the live workers finished over the window, whoever sent it."""
    system_seconds: list[SystemSecond]
    """Per second of that window, oldest first: jobs, errors, tokens, queue wait."""
    minute: Minute
    seconds: list[Second]
    """Per second of this API's window, oldest first: requests, errors, p50/p99 ms."""
    recent_errors: list[RecentError]
    """Newest first: error answers of this API's job routes (no bodies), the viewer's own only."""


def _worker_row(beat: Heartbeat, r: WorkerRates, now: int) -> WorkerRow:
    return WorkerRow(beat.id, beat.host, beat.pid, beat.models, round(max(now - beat.beat_ms, 0) / 1000, 1),
                     beat.busy, beat.executors, beat.concurrency, beat.jobs_done, beat.client_errors, beat.errors,
                     beat.started_ms, r.jobs_per_s, r.tokens_per_s, r.wait_p50_ms)


async def _read_redis(state: ApiState, now_s: int) -> tuple[str, list[Heartbeat], Totals, list[int | None]]:
    """Heartbeats, the workers' totals (read and summed once a second) and queue depths."""
    try:
        beats = await live_workers(state.redis, state.keys)
        workload = state.workload
        if workload is None or workload.now_s != now_s:
            activity = await read_activity(state.redis, state.keys, [b.id for b in beats])
            workload = state.workload = totals(activity, now_s)
        depths: list[int | None] = [await state.queue.depth(model) for model in state.model_names]
    except Exception as exc:
        if not redis_failure(exc):
            raise
        return f"unreachable: {type(exc).__name__}", [], totals({}, now_s), [None] * len(state.model_names)
    return "ok", beats, workload, depths


async def snapshot(state: ApiState, viewer: str | None) -> Status:
    """`viewer`: the API key whose errors to show, None for every client's."""
    now = now_ms()
    redis, beats, workload, depths = await _read_redis(state, now // 1000)
    seconds = state.recent.seconds()
    requests, p50, p99 = state.recent.minute()
    minute = Minute(WINDOW_S, requests, round(requests / WINDOW_S, 2), sum(s.errors for s in seconds), p50, p99)
    queues = [QueueRow(m, d, sum(m in b.models for b in beats))
              for m, d in zip(state.model_names, depths, strict=True)]
    idle = WorkerRates(0.0, 0.0, None)
    workers = sorted((_worker_row(b, workload.workers.get(b.id, idle), now) for b in beats),
                     key=lambda w: (w.host, w.id))
    return Status(now, redis, state.started_ms, viewer, workers, queues, workload.minute, workload.seconds, minute,
                  seconds, state.recent.errors(viewer))
