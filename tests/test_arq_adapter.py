"""What the worker needs from arq's internals (worker/arq_adapter.py), tested
as behaviour against a real redis-server, so an arq release that changes one
of them fails here rather than in production; and the claim loops' blocking
client (worker/wakers.py)."""

from __future__ import annotations

from redis.asyncio import Redis

from worker.arq_adapter import ArqWorker, func
from worker.wakers import blocking_client


async def _noop(ctx) -> None:
    return None


async def test_release_slot_gives_back_the_slot_a_started_job_took(redis_server):
    pool = Redis.from_url(redis_server.url)
    worker = ArqWorker(functions=[func(_noop, name="noop")], queue_name="q", redis_pool=pool, handle_signals=False,
                       max_jobs=2)
    try:
        free = worker.sem._value
        await worker.sem.acquire()  # what the light lane takes per job
        worker.job_counter += 1
        worker.release_slot()
        assert (worker.sem._value, worker.job_counter) == (free, 0)
    finally:
        await pool.aclose()


async def test_blocking_client_is_a_connection_of_its_own_to_the_same_server(redis_server):
    pool = Redis.from_url(redis_server.url)
    waker = blocking_client(pool)
    try:
        assert waker is not pool and waker.connection_pool is not pool.connection_pool
        assert waker.connection_pool.connection_kwargs["port"] == pool.connection_pool.connection_kwargs["port"]
        await pool.lpush("bc:list", b"x")
        assert await waker.brpop(["bc:list"], timeout=1) == (b"bc:list", b"x")
    finally:
        await waker.aclose()
        await pool.aclose()


async def test_blocking_client_waits_its_block_time_beyond_the_pools_reply_timeout(redis_server):
    pool = Redis.from_url(redis_server.url, socket_timeout=5.0)
    waker = blocking_client(pool, block_s=0.5)
    try:
        assert waker.connection_pool.connection_kwargs["socket_timeout"] == 5.5
        assert pool.connection_pool.connection_kwargs["socket_timeout"] == 5.0  # the pool's own kwargs untouched
        assert blocking_client(Redis.from_url(redis_server.url), 0.5).connection_pool.connection_kwargs.get(
            "socket_timeout") is None
        assert blocking_client(pool, reply_timeout_s=1.0).connection_pool.connection_kwargs["socket_timeout"] == 1.0
    finally:
        await waker.aclose()
        await pool.aclose()


async def test_blocking_client_shares_fakeredis_in_memory_server():
    import fakeredis

    pool = fakeredis.FakeAsyncRedis()
    assert blocking_client(pool) is pool
