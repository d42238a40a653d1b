"""Worker Prometheus metrics (served on the worker's own port)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

JOBS = Counter("derender_worker_jobs_total", "Jobs finished, by endpoint and outcome.", ["endpoint", "outcome"])
QUEUE_WAIT = Histogram(
    "derender_worker_queue_wait_seconds", "Enqueue to start of execution.", buckets=_LATENCY_BUCKETS
)
EXECUTION = Histogram(
    "derender_worker_execution_seconds", "Derender CPU work per job.", ["endpoint"], buckets=_LATENCY_BUCKETS
)
TOKENS = Counter("derender_worker_tokens_total", "Completion tokens derendered.", ["model"])
