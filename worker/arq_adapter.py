"""The one module that touches arq's internals (checked against arq 0.28.0).

arq 0.28 is maintenance-only upstream and pins redis-py < 6; we keep its job
lifecycle (in-progress key, retries, max tries, drain on shutdown) and change
how jobs are found and claimed (worker/queue_worker.py). That needs a few
things arq does not publish; each is wrapped here under a name that says
what we need from it, and tests/worker/test_arq_adapter.py checks that behaviour
(not a version string), so an arq change that breaks one fails a test:

- `ArqWorker.poll_queue()`   arq's `_poll_iteration`: read due jobs from the
  queue ZSET, start them, reap finished tasks;
- `ArqWorker.release_slot()` arq's `_release_sem_dec_counter_on_complete`:
  give back the concurrency slot a started job took;
- `in_progress_key()`        the claim key arq's `run_job`/`finish_job` use;
- `retry_key()`              arq's attempt counter, INCRed by `run_job`;
- `use_key_prefix()`         arq names its keys with module constants, so they
  are rebound (where each arq module imported them) under our prefix;
- `blocking_client()`        a second connection to the pool's server, from
  redis-py's `connection_kwargs` (its reply timeout lengthened by the block time).
"""

from __future__ import annotations

from typing import Any

import arq.connections
import arq.constants
import arq.jobs
import arq.worker
from arq.connections import RedisSettings, create_pool
from arq.worker import Worker, func
from redis.asyncio import Redis

from derender_queue.wire.connection import copy_pool, in_memory
from derender_queue.wire.keys import Keys

ARQ_VERSION_CHECKED = "0.28.0"
__all__ = ["ARQ_VERSION_CHECKED", "ArqWorker", "RedisSettings", "blocking_client", "create_pool", "func",
           "in_progress_key", "retry_key", "use_key_prefix"]


def use_key_prefix(keys: Keys) -> None:
    """Point arq's bookkeeping keys under our prefix. One process serves one
    deployment, so rebinding the module constants once is enough."""
    for module in (arq.constants, arq.worker, arq.jobs, arq.connections):
        for name, value in keys.arq_prefixes.items():
            if hasattr(module, name):
                setattr(module, name, value)


def in_progress_key(job_id: str) -> str:
    """The key whose presence means "a worker holds this job" to arq."""
    # arq.worker imported the constant without re-exporting it; use_key_prefix rebinds it there.
    prefix: str = arq.worker.in_progress_key_prefix  # type: ignore[attr-defined]
    return prefix + job_id


def retry_key(job_id: str) -> str:
    """arq's attempt counter for a job (`ctx["job_try"]`)."""
    prefix: str = arq.worker.retry_key_prefix  # type: ignore[attr-defined]  # imported there, rebound there too
    return prefix + job_id


def blocking_client(pool: Redis, block_s: float = 0.0, reply_timeout_s: float | None = None) -> Redis:
    """A client of its own to the pool's server (for a blocking command, or
    never to queue behind the pool's users). Its reply timeout: `reply_timeout_s`
    or the pool's, plus `block_s`, the longest its command blocks in Redis;
    none if neither is set. fakeredis's in-memory server is shared instead."""
    if in_memory(pool):
        return pool
    kwargs: dict[str, Any] = dict(pool.connection_pool.connection_kwargs)
    timeout = kwargs.get("socket_timeout") if reply_timeout_s is None else reply_timeout_s
    options: dict[str, Any] = {"max_connections": 1}
    if timeout is not None:
        options["socket_timeout"] = timeout + block_s
    return Redis.from_pool(copy_pool(pool.connection_pool, **options))  # a Sentinel pool too


class ArqWorker(Worker):
    """arq's Worker with the internals we use under names of their own."""

    async def poll_queue(self) -> None:
        await self._poll_iteration()

    def release_slot(self) -> None:
        self._release_sem_dec_counter_on_complete()
