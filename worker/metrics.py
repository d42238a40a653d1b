"""Worker Prometheus metrics (each worker process serves its own port)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from prometheus_client import Counter, Gauge, Histogram

from derender_queue.wire.activity import WAIT_BOUNDS_S

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_LAG_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5)

JOBS = Counter("derender_worker_jobs_total", "Jobs finished, by endpoint and outcome (ok, client_error, error).",
               ["endpoint", "outcome"])
QUEUE_WAIT = Histogram("derender_worker_queue_wait_seconds", "Enqueue to start of execution.", buckets=WAIT_BOUNDS_S)
EXECUTION = Histogram("derender_worker_execution_seconds", "Derender CPU work per job.", ["endpoint"],
                      buckets=_LATENCY_BUCKETS)
TOKENS = Counter("derender_worker_tokens_total", "Completion tokens derendered.", ["model"])
EXECUTOR_BUSY = Gauge("derender_worker_executor_busy_threads", "Executor threads running derender work now.")
LOOP_LAG = Histogram("derender_worker_event_loop_lag_seconds",
                     "How late the worker's event loop wakes a 10 ms timer (GIL and loop stalls).",
                     buckets=_LAG_BUCKETS)
START_FAILURES = Counter(
    "derender_worker_job_start_failures_total",
    "Lane values that could not be started as a job: unreadable (not a job: dropped), redis (a Redis call "
    "failed: read back and retried), internal (a bug: logged, retried).",
    ["reason"])
BACKGROUND_ERRORS = Counter("derender_worker_background_errors_total",
                            "Errors a background task survived (heartbeat, loop-lag, redis-watch), by task.", ["task"])
JOB_LOOP_ERRORS = Counter("derender_worker_job_loop_errors_total",
                          "Unexpected errors in a model's job loop (logged; the loop carries on).", ["model"])
HEAVY_CHILD_RESTARTS = Counter("derender_worker_heavy_child_restarts_total",
                               "Heavy-job children found dead and replaced by a fork of the zygote.")
STEPS_SHARED = Counter("derender_worker_steps_shared_total",
                       "Step jobs split among idle heavy children, their shares derendered side by side.")
HELD_TEXT_BYTES = Counter("derender_worker_held_text_written_bytes_total",
                          "Streams' held text written to Redis (core/parsers/spill.py).")
HELD_TEXT_FETCHES = Counter("derender_worker_held_text_fetches_total",
                            "Jobs run again after fetching the streams' held text they read.")
ACTIVITY_ERRORS = Counter("derender_worker_activity_errors_total",
                          "Unexpected errors publishing this worker's last minute for the status page (logged).")
WORKER_INFO = Gauge("derender_worker_info", "This worker: models served and tokenizer hashes.",
                    ["worker", "model", "tokenizer_sha256"])

LAG_INTERVAL_S = 0.01


def job_counts() -> dict[str, int]:
    """Jobs finished by this process so far, by outcome (for the heartbeat)."""
    counts = {"ok": 0, "client_error": 0, "error": 0}
    for family in JOBS.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                outcome = sample.labels["outcome"]
                counts[outcome] = counts.get(outcome, 0) + int(sample.value)
    return counts


def busy_executors() -> int:
    return int(sum(s.value for family in EXECUTOR_BUSY.collect() for s in family.samples))


async def sample_loop_lag(ticked: Callable[[], None], interval_s: float = LAG_INTERVAL_S) -> None:
    """Measure, forever, how late a short sleep wakes: the time the loop
    could not run because something held it (or the GIL); `ticked` tells the
    process's liveness that the loop runs."""
    while True:
        start = time.perf_counter()
        await asyncio.sleep(interval_s)
        LOOP_LAG.observe(max(time.perf_counter() - start - interval_s, 0.0))
        ticked()
