"""`derender api`: the ASGI app on uvicorn (uvloop + httptools, heads bounded: api/http_head.py)."""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable

import uvicorn
from redis.asyncio import Redis
from starlette.types import ASGIApp

from derender_queue.models_config import read_models_config
from derender_queue.settings import Settings
from derender_queue.wire.cluster import client_for, is_cluster
from derender_queue.wire.connection import async_client, sibling_client
from derender_queue.wire.keys import Keys
from derender_queue.wire.queue import JobQueue
from derender_queue.wire.redis_url import is_cluster_url
from derender_queue.wire.replication import Durability
from derender_queue.wire.waiter import ResultWaiter

from . import metrics
from .app import create_app
from .http_head import with_head_timeout
from .state import ApiState


def redis_clients(settings: Settings) -> tuple[Redis, Redis]:
    """Requests get short timeouts (a Redis outage is a quick 503, never a hang);
    the result subscription blocks, so it gets its own client without them."""
    url = settings.redis_url_or_default()
    if is_cluster_url(url):  # the waiter subscribes on connections of its own (wire/sharded_pubsub.py)
        cluster = client_for(url, socket_timeout=2.0, socket_connect_timeout=2.0)
        return cluster, cluster
    requests = async_client(url, socket_timeout=2.0, socket_connect_timeout=2.0, health_check_interval=30)
    listener = sibling_client(requests, socket_timeout=None, socket_connect_timeout=2.0, health_check_interval=10)
    return requests, listener


def state_factory(settings: Settings, redis: Redis | None = None,
                  listener: Redis | None = None) -> Callable[[], Awaitable[ApiState]]:
    async def build() -> ApiState:
        nonlocal redis, listener
        if redis is None:
            redis, listener = redis_clients(settings)
        keys = Keys(settings.key_prefix, cluster=is_cluster(redis))
        names = [c.name for c in read_models_config(settings.models_config)]
        queue = JobQueue(redis, keys, job_ttl_ms=settings.job_ttl_s * 1000,
                         durability=Durability.of(settings.min_replicas, settings.replica_timeout_s),
                         batching=settings.batching, shards=settings.shards)
        waiter = ResultWaiter(listener or redis, keys, on_error=metrics.background_error,
                              tags=queue.tags if keys.cluster else ())
        return ApiState(settings, redis, keys, queue, waiter, names)

    return build


def uvicorn_server(settings: Settings, app: ASGIApp) -> uvicorn.Server:
    config = uvicorn.Config(
        app, host=settings.host, port=settings.port, loop="uvloop",
        http=with_head_timeout(settings.body_idle_timeout_s),  # httptools, heads bounded
        log_level="warning", access_log=False,
        # In-flight requests may wait up to the request timeout: let them finish.
        timeout_graceful_shutdown=int(settings.request_timeout_s) + 5,
    )
    return uvicorn.Server(config)


def exit_cleanly_after_shutdown() -> None:
    """uvicorn re-raises SIGTERM/SIGINT after its graceful shutdown, with the
    handlers it found installed; a no-op handler lets the process exit 0."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)


def run_api(settings: Settings) -> None:
    exit_cleanly_after_shutdown()
    uvicorn_server(settings, create_app(state_factory(settings))).run()
