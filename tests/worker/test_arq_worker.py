"""What the worker relies on arq for (worker/queue_worker.py), tested as
behaviour, so an arq release that changes it fails here rather than in
production: `async_run()` runs our `main()`; on SIGTERM
`handle_sig_wait_for_completion()` stops the lanes claiming
(`allow_pick_jobs`), waits for the jobs in `tasks`, then ends the main task.
And the claim loops' blocking client (worker/wakers.py), on a real redis-server."""

from __future__ import annotations

import asyncio
import signal

import fakeredis
import pytest
from redis.asyncio import Redis

import worker.queue_worker as queue_worker
from derender_queue.wire.keys import Keys
from worker.wakers import blocking_client


async def _forever() -> None:
    await asyncio.Event().wait()


@pytest.fixture
def idle_lanes(monkeypatch):
    """main() without its claim loops and v1 sweep: the lifecycle alone."""
    started = asyncio.Event()

    def lanes(host):
        started.set()
        return [asyncio.create_task(_forever())]

    monkeypatch.setattr(queue_worker, "lane_tasks", lanes)
    monkeypatch.setattr(queue_worker, "answer_v1_leftovers", lambda *args: _forever())
    return started


def _worker(wait_s: int) -> queue_worker.DerenderWorker:
    return queue_worker.DerenderWorker(keys=Keys("t"), model="m", pool=fakeredis.FakeAsyncRedis(),
                                       ctx={"runtime": None}, job_completion_wait=wait_s)


def _job(w: queue_worker.DerenderWorker, name: str, seconds: float) -> asyncio.Task[None]:
    """A running job as the lanes hold it: in `tasks` until it is done."""
    task = asyncio.create_task(asyncio.sleep(seconds))
    w.tasks[name] = task
    task.add_done_callback(lambda _: w.tasks.pop(name, None))
    return task


async def test_sigterm_drain_waits_for_the_running_jobs_then_ends_main(idle_lanes):
    w = _worker(wait_s=30)
    run = asyncio.create_task(w.async_run())
    await asyncio.wait_for(idle_lanes.wait(), 5)  # our main() runs
    job = _job(w, "a", 0.3)
    w.handle_sig_wait_for_completion(signal.SIGTERM)
    assert w.allow_pick_jobs is False  # the lanes stop claiming
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(run, 10)
    assert job.done() and not job.cancelled(), "the held job finished before the worker ended"


async def test_a_job_past_the_drain_timeout_is_cancelled(idle_lanes):
    w = _worker(wait_s=1)
    run = asyncio.create_task(w.async_run())
    await asyncio.wait_for(idle_lanes.wait(), 5)
    job = _job(w, "b", 3600)
    w.handle_sig_wait_for_completion(signal.SIGTERM)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(run, 10)
    await asyncio.sleep(0)
    assert job.cancelled()


def test_arq_is_used_without_its_internals():
    """No private arq name is touched anywhere in the product (worker/queue_worker.py says what is used)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    files = [p for folder in ("worker", "api", "derender_queue") for p in (root / folder).rglob("*.py")]
    source = "".join(p.read_text() for p in files)
    private = {"_poll_iteration", "_release_sem_dec_counter_on_complete", "in_progress_key_prefix", "retry_key_prefix",
               "job_key_prefix", "result_key_prefix", "health_check_key_suffix"}
    assert {name for name in private if re.search(rf"\b{name}\b", source)} == set()
    assert "self.sem" not in source and "job_counter" not in source


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
