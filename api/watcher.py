"""Queue depths and live workers, refreshed every heartbeat interval for
/metrics and backpressure. The API exports them (not only workers) so an
autoscaler sees work when no worker runs."""

from __future__ import annotations

import asyncio

from redis.exceptions import RedisError

from derender_queue.metrics import QUEUE_DEPTH
from derender_queue.wire.heartbeat import live_workers

from . import metrics
from .state import ApiState


async def watch_queues(state: ApiState, interval_s: float) -> None:
    while True:
        try:
            for model in state.model_names:
                depth = await state.redis.zcard(state.keys.queue(model))
                state.admission.refresh(model, depth)
                QUEUE_DEPTH.labels(model).set(depth)
            workers = await live_workers(state.redis, state.keys)
            for model in state.model_names:
                metrics.WORKERS_LIVE.labels(model).set(sum(model in w.models for w in workers))
        except (RedisError, OSError):
            pass
        await asyncio.sleep(interval_s)
