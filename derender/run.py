"""`derender run`: the newcomer's main job, everything in one command.

With `DERENDER_REDIS_URL` set: the API here and one `derender worker` child
process against that Redis, with this process's settings (it gets SIGTERM if
this process dies). Without it: an embedded in-memory Redis (fakeredis)
shared by an in-process worker and the API, so real requests are served with
nothing else installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from typing import TYPE_CHECKING

from derender_queue.settings import Settings

if TYPE_CHECKING:  # loaded lazily: `run` with a real Redis never loads a tokenizer here
    from derender_queue.core import ModelRegistry
    from worker.cpu_pool import CpuPool

EXAMPLE = """\
derender-queue is serving on {url}  (Ctrl-C stops it)
{mode}
Try it:

  curl -s {url}/v1/chat/completions/derender -H 'content-type: application/json' -d '{{
    "generate_response": {{"request_id": "demo", "choices": [{{"index": 0,
      "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}}]}}}}'

Status page (workers, queues, last minute, errors): {url}/status
Also: {url}/health  {url}/ready  {url}/v1/models  {url}/metrics  {url}/openapi.json
"""


def run_all(settings: Settings) -> int:
    url = f"http://{settings.host}:{settings.port}"
    if settings.redis_url:
        from derender_queue.wire.redis_url import redacted

        if problem := _unanswered(settings.redis_url):
            print(problem, file=sys.stderr)
            return 2
        from api.server import run_api
        from worker.supervisor import spawn_worker

        worker = spawn_worker(settings)  # every setting of ours, flags such as --models-config included
        mode = f"Redis: {redacted(settings.redis_url)} (worker: child process {worker.pid})"
        print(EXAMPLE.format(url=url, mode=mode), flush=True)
        try:
            run_api(settings)
        finally:
            worker.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.wait(30)
        return 0
    from api.server import exit_cleanly_after_shutdown

    mode = "Redis: embedded in-memory (set DERENDER_REDIS_URL to use a real one)"
    print(EXAMPLE.format(url=url, mode=mode), flush=True)
    exit_cleanly_after_shutdown()
    from derender_queue.core import ModelRegistry, read_models_config
    from worker.main import cpu_pool

    registry = ModelRegistry(read_models_config(settings.models_config, settings.compat))
    secret = settings.stream_secret.encode() if settings.stream_secret else None  # one process: any key
    cpu = cpu_pool(settings, registry, secret)  # before any thread or loop: it may fork
    asyncio.run(_embedded(settings, registry, cpu))
    return 0


def _unanswered(redis_url: str) -> str | None:
    """One line when the Redis `redis_url` names does not answer a PING: the
    newcomer's command says so rather than serve 503s (`derender api` and
    `worker`, started beside a Redis that may come up later, wait for it)."""
    import redis

    from derender_queue.wire.cluster import sync_client_for
    from derender_queue.wire.redis_url import redis_address

    try:
        with sync_client_for(redis_url, socket_connect_timeout=2, socket_timeout=2) as client:
            client.ping()
    except (redis.RedisError, redis.exceptions.RedisClusterException, OSError) as exc:
        return (f"derender: Redis at {redis_address(redis_url)} does not answer ({type(exc).__name__}: {exc}): "
                "check DERENDER_REDIS_URL, or unset it for the embedded in-memory Redis")
    return None


async def _embedded(settings: Settings, registry: ModelRegistry, cpu: CpuPool) -> None:
    import fakeredis

    from api.app import create_app
    from api.server import state_factory, uvicorn_server
    from worker.main import serve

    server = fakeredis.FakeServer()
    worker_redis = fakeredis.FakeAsyncRedis(server=server)
    api_redis = fakeredis.FakeAsyncRedis(server=server)
    listener = fakeredis.FakeAsyncRedis(server=server)
    stop = asyncio.Event()
    worker = asyncio.create_task(serve(settings, registry, worker_redis, stop=stop, cpu=cpu))
    api = uvicorn_server(settings, create_app(state_factory(settings, api_redis, listener)))
    try:
        await api.serve()
    finally:
        stop.set()
        await worker
