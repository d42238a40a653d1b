"""API Prometheus metrics."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import Counter, Gauge, Histogram

_BUCKETS = (0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_LAG_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5)

REQUESTS = Counter("derender_api_requests_total", "HTTP requests, by route and status.", ["route", "status"])
LATENCY = Histogram("derender_api_request_seconds", "HTTP request latency, by route.", ["route"], buckets=_BUCKETS)
IN_FLIGHT = Gauge("derender_api_requests_in_flight", "HTTP requests being served.")
ENQUEUED = Counter("derender_api_jobs_enqueued_total", "Jobs enqueued, by endpoint.", ["endpoint"])
WAIT_TIMEOUTS = Counter("derender_api_wait_timeouts_total", "Synchronous requests answered 504.")
CANCELLED = Counter("derender_api_jobs_cancelled_total", "Queued jobs withdrawn (client gone or timed out).")
WORKERS_LIVE = Gauge("derender_workers_live", "Workers with a live heartbeat, by model served.", ["model"])
REJECTED = Counter("derender_api_rejected_total", "Requests refused before enqueueing, by reason.", ["reason"])
INFLIGHT_BYTES = Gauge("derender_api_inflight_bytes", "Request and response bytes held now (api/inflight.py).")
CLIENT_DISCONNECTS = Counter("derender_api_client_disconnects_total", "Clients gone before their body was read.")
BACKGROUND_ERRORS = Counter("derender_api_background_errors_total", "Errors a background task survived, by task.",
                            ["task"])
BAD_HEARTBEATS = Counter("derender_api_bad_heartbeats_total", "Worker heartbeats skipped as undecodable.")
LOOP_LAG = Histogram("derender_api_event_loop_lag_seconds",
                     "How late the API's event loop wakes a 10 ms timer (time the loop was held).",
                     buckets=_LAG_BUCKETS)

LAG_INTERVAL_S = 0.01


def background_error(task: str) -> None:
    """A background task survived an error (wire/background.py)."""
    BACKGROUND_ERRORS.labels(task).inc()


async def sample_loop_lag(interval_s: float = LAG_INTERVAL_S) -> None:
    """Measure, until cancelled, how late a short sleep wakes: every request
    on this loop waited at least that long (the worker has the same sampler)."""
    while True:
        start = time.perf_counter()
        await asyncio.sleep(interval_s)
        LOOP_LAG.observe(max(time.perf_counter() - start - interval_s, 0.0))
