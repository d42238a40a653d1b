"""Queue depths and live workers, refreshed every heartbeat interval for
/metrics and backpressure. The API exports them (not only workers) so an
autoscaler sees work when no worker runs.

The loop outlives every error: a Redis outage is waited out, anything else
(a bug, data it cannot read) is logged and counted
(`derender_api_background_errors_total{task="queue-watcher"}`) and the next
pass runs as usual. A heartbeat it cannot decode is skipped and counted
(`derender_api_bad_heartbeats_total`), logged once per worker id.
"""

from __future__ import annotations

import asyncio
import logging

from derender_queue.wire.depth import QUEUE_DEPTH
from derender_queue.wire.failures import redis_failure
from derender_queue.wire.heartbeat import live_workers

from . import metrics
from .state import ApiState

log = logging.getLogger("derender.api")
TASK = "queue-watcher"


async def watch_queues(state: ApiState) -> None:
    reported: set[str] = set()

    def bad_heartbeat(worker: str, exc: Exception) -> None:
        metrics.BAD_HEARTBEATS.inc()
        if worker not in reported:
            reported.add(worker)
            log.warning("skipping the heartbeat of worker %r: not this version's format (%s)", worker, exc)

    while True:
        try:
            for model in state.model_names:
                depth = await state.queue.depth(model)
                state.admission.refresh(model, depth)
                QUEUE_DEPTH.labels(model).set(depth)
            workers = await live_workers(state.redis, state.keys, bad_heartbeat)
            for model in state.model_names:
                metrics.WORKERS_LIVE.labels(model).set(sum(model in w.models for w in workers))
        except Exception as exc:
            if not redis_failure(exc):  # else Redis is down: /ready says so; the next pass retries
                log.exception("queue watcher pass failed; retrying next interval")
                metrics.BACKGROUND_ERRORS.labels(TASK).inc()
        await asyncio.sleep(state.settings.heartbeat_s)

