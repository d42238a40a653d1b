"""What the worker needs from arq's internals (worker/arq_adapter.py), tested
as behaviour against a real redis-server, so an arq release that changes one
of them fails here rather than in production."""

from __future__ import annotations

import asyncio
import json

import arq.constants
import arq.worker
import pytest
from redis.asyncio import Redis

from derender_queue.wire.keys import Keys, now_ms
from worker.arq_adapter import ArqWorker, blocking_client, func, in_progress_key, retry_key, use_key_prefix


@pytest.fixture
def arq_prefix(prefix):
    """use_key_prefix rebinds arq's module constants: put them back afterwards."""
    modules = (arq.constants, arq.worker, arq.jobs, arq.connections)
    saved = {(m, n): getattr(m, n) for m in modules for n in Keys().arq_prefixes if hasattr(m, n)}
    keys = Keys(prefix)
    use_key_prefix(keys)
    yield keys
    for (module, name), value in saved.items():
        setattr(module, name, value)


def _deserialize(value: bytes) -> dict:
    job = json.loads(value)
    return {"f": "probe", "a": (job["arg"],), "k": {}, "t": None, "et": job["enqueued_ms"]}


async def _worker(url: str, keys: Keys, seen: list, **kwargs) -> tuple[ArqWorker, Redis]:
    pool = Redis.from_url(url)

    async def probe(ctx, arg):
        # While the job runs, arq's claim is held under our prefix.
        seen.append((arg, ctx["job_try"], await pool.exists(in_progress_key(ctx["job_id"]))))
        return None

    worker = ArqWorker(
        functions=[func(probe, name="probe")], queue_name=keys.queue("m"), redis_pool=pool,
        job_deserializer=_deserialize, job_serializer=lambda _: b"{}", keep_result=0,
        handle_signals=False, health_check_key=keys.health("m"), **kwargs,
    )
    return worker, pool


async def _enqueue(pool: Redis, keys: Keys, job_id: str, arg: str) -> None:
    await pool.set(keys.job(job_id), json.dumps({"arg": arg, "enqueued_ms": now_ms()}))
    await pool.zadd(keys.queue("m"), {job_id: now_ms() - 1})


def test_use_key_prefix_moves_arqs_keys_under_ours(arq_prefix):
    assert in_progress_key("j1") == f"{arq_prefix.prefix}:in-progress:j1"
    assert arq.worker.retry_key_prefix == f"{arq_prefix.prefix}:retry:"
    assert arq.worker.job_key_prefix == f"{arq_prefix.prefix}:job:"


async def test_poll_queue_runs_due_jobs_under_our_keys_and_cleans_up(redis_server, arq_prefix):
    seen: list = []
    worker, pool = await _worker(redis_server.url, arq_prefix, seen)
    try:
        await _enqueue(pool, arq_prefix, "j1", "hello")
        await worker.poll_queue()
        await asyncio.gather(*worker.tasks.values())
        assert seen == [("hello", 1, 1)], "arq ran the job once, first try, holding our in-progress key"
        # finish_job: the queue entry, the job and its claim are gone; keep_result=0 stores nothing.
        assert await pool.zcard(arq_prefix.queue("m")) == 0
        assert not await pool.exists(arq_prefix.job("j1"), in_progress_key("j1"), f"{arq_prefix.prefix}:arq-result:j1")
        assert await pool.exists(arq_prefix.health("m")), "the poll writes arq's health line"
    finally:
        await pool.aclose()


async def test_a_job_whose_worker_died_is_run_again_as_its_next_try(redis_server, arq_prefix):
    """Our poison cutoff (DERENDER_MAX_TRIES) reads ctx["job_try"]: arq counts
    attempts in its retry key, which a dead worker's attempt leaves behind."""
    seen: list = []
    worker, pool = await _worker(redis_server.url, arq_prefix, seen)
    try:
        await _enqueue(pool, arq_prefix, "j2", "again")
        assert retry_key("j2") == f"{arq_prefix.prefix}:retry:j2"
        await pool.set(retry_key("j2"), 1)
        await worker.poll_queue()
        await asyncio.gather(*worker.tasks.values())
        assert seen == [("again", 2, 1)]
    finally:
        await pool.aclose()


async def test_a_claimed_job_is_not_started_by_the_poll(redis_server, arq_prefix):
    """Another worker's in-progress key keeps arq's poll off the job."""
    seen: list = []
    worker, pool = await _worker(redis_server.url, arq_prefix, seen)
    try:
        await _enqueue(pool, arq_prefix, "j3", "busy")
        await pool.set(in_progress_key("j3"), b"1", px=10_000)
        await worker.poll_queue()
        await asyncio.gather(*worker.tasks.values())
        assert seen == []
    finally:
        await pool.aclose()


async def test_release_slot_gives_back_the_slot_a_started_job_took(redis_server, arq_prefix):
    worker, pool = await _worker(redis_server.url, arq_prefix, [], max_jobs=2)
    try:
        free = worker.sem._value
        await worker.sem.acquire()  # what our start_jobs takes per job
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
