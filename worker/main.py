"""`derender worker`: one process serving every configured model from Redis."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys

from arq.connections import RedisSettings, create_pool
from redis.asyncio import Redis
from redis.exceptions import RedisError

from derender_queue.settings import Settings
from derender_queue.wire import Keys, new_job_id
from worker import metrics
from worker.cpu_pool import CpuPool
from worker.derender import Derenderer, ModelRegistry
from worker.heartbeat import beat_forever, new_heartbeat
from worker.jobs import JobRuntime
from worker.queue_worker import DerenderWorker, use_key_prefix

log = logging.getLogger("derender.worker")


async def connect(settings: Settings) -> Redis:
    """arq's pool (it retries the first connection) for the configured Redis."""
    return await create_pool(RedisSettings.from_dsn(settings.redis_url_or_default()))


def cpu_pool(settings: Settings, registry: ModelRegistry) -> CpuPool:
    """Build before the event loop and other threads start (process mode forks)."""
    return CpuPool(Derenderer(registry), settings.heavy_executor, settings.heavy_workers,
                   metrics.EXECUTOR_BUSY.inc, settings.heavy_nice)


async def serve(
    settings: Settings, registry: ModelRegistry, pool: Redis, *, stop: asyncio.Event | None = None,
    cpu: CpuPool | None = None,
) -> None:
    """Run workers for all models until `stop` is set (SIGTERM/SIGINT set it when
    no `stop` is given), then stop taking jobs and finish the ones held."""
    keys = Keys(settings.key_prefix)
    use_key_prefix(keys)
    worker_id = new_job_id()[:12]
    cpu = cpu or cpu_pool(settings, registry)
    sys.setswitchinterval(settings.switch_interval_ms / 1000)
    runtime = JobRuntime(
        derenderer=cpu.derenderer, cpu=cpu, redis=pool, keys=keys,
        worker_id=worker_id, result_ttl_ms=settings.result_ttl_s * 1000, inline_cpu=settings.inline_cpu,
        debug_delay_s=settings.debug_job_delay_s, max_tries=settings.max_tries,
        max_body_bytes=settings.max_body_bytes,
    )
    workers = [
        DerenderWorker(
            keys=keys, model=name, pool=pool, ctx={"runtime": runtime},
            max_jobs=settings.concurrency, poll_delay=settings.poll_delay_s,
            job_completion_wait=settings.drain_timeout_s, lease_s=settings.job_lease_s,
        )
        for name in registry.names
    ]
    models = {name: registry.get(name).vocab.sha256 for name in registry.names}
    for name, sha in models.items():
        metrics.WORKER_INFO.labels(worker_id, name, sha).set(1)
    background = [
        asyncio.create_task(beat_forever(pool, keys, new_heartbeat(worker_id, models, settings.concurrency),
                                         settings.heartbeat_s)),
        asyncio.create_task(metrics.sample_loop_lag()),
        asyncio.create_task(_watch_queue_depth(pool, keys, registry.names, settings.heartbeat_s)),
    ]
    if stop is None:
        stop = asyncio.Event()
        _on_signals(stop)
    runs = [asyncio.create_task(w.async_run()) for w in workers]
    log.info("worker %s serving %s", worker_id, ", ".join(registry.names))
    await stop.wait()
    for w in workers:  # stop taking jobs, finish the ones held
        w.handle_sig_wait_for_completion(signal.SIGTERM)
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.gather(*runs, return_exceptions=True)
    for task in background:
        task.cancel()
    await asyncio.gather(*background, return_exceptions=True)
    cpu.shutdown()
    log.info("worker %s stopped", worker_id)


async def _watch_queue_depth(pool: Redis, keys: Keys, models: list[str], interval_s: float) -> None:
    while True:
        try:
            for model in models:
                metrics.QUEUE_DEPTH.labels(model).set(await pool.zcard(keys.queue(model)))
        except (RedisError, OSError):
            pass
        await asyncio.sleep(interval_s)


def _on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)


def run_worker(settings: Settings) -> int:
    """The `derender worker` process: load models, metrics port, serve until signalled."""
    from worker.derender import read_models_config
    from worker.http import serve_metrics_and_health

    registry = ModelRegistry(read_models_config(settings.models_config))
    cpu = cpu_pool(settings, registry)
    if settings.metrics_port:
        serve_metrics_and_health(settings.metrics_port)

    async def main() -> None:
        pool = await connect(settings)
        try:
            await serve(settings, registry, pool, cpu=cpu)
        finally:
            await pool.aclose()

    import uvloop

    uvloop.run(main())
    return 0
