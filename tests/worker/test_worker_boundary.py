"""Hostile producers at the worker's boundary (issue 12, items 1-3, the worker
side): whatever a producer writes into Redis, the worker's job loop keeps
taking jobs, and each unusable entry ends as one error result or as a
logged, counted drop. Real redis-server, real worker processes."""

from __future__ import annotations

import asyncio
import json

import pytest
import redis

from derender_queue.wire.client import DerenderClient
from derender_queue.wire.envelope import unpack_result
from derender_queue.wire.keys import Keys, now_ms
from tests.helpers.stack import Stack, get_json, wait_until

MODEL = "deepseek-v4"


def chat_body(tag: str) -> dict:
    return {"generate_response": {"request_id": tag, "choices": [
        {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}]}}


def derender_one(url: str, prefix: str, tag: str, timeout: float = 20) -> dict:
    async def main() -> dict:
        async with DerenderClient(url, key_prefix=prefix) as client:
            return await client.derender_chat(chat_body(tag), timeout=timeout)

    return asyncio.run(main())


def health(s: Stack) -> int:
    return get_json(f"http://127.0.0.1:{s.metrics_ports[0]}/health")[0]


@pytest.fixture
def stack(redis_server, prefix):
    s = Stack(redis_server.url, prefix, workers=1, extra_env={"DERENDER_JOB_LEASE_S": "1"}).start()
    yield s
    s.close()


def test_a_job_id_that_is_not_utf8_is_dropped_and_the_worker_keeps_serving(stack, redis_server, prefix):
    """Before: the worker's loop died on `raw_id.decode()`; every later job
    waited for its timeout while /health said 200."""
    r, keys = redis.Redis.from_url(redis_server.url), Keys(prefix)
    bad = b"p\xff"
    r.zadd(keys.queue(MODEL), {bad: 1})
    r.lpush(keys.wake(MODEL), bad)
    assert derender_one(redis_server.url, prefix, "after")["id"] == "after"
    wait_until(lambda: r.zscore(keys.queue(MODEL), bad) is None, 20, what="the unusable id off the queue")
    assert stack.worker_metric("derender_worker_job_start_failures_total", reason="unusable_id") >= 1
    assert health(stack) == 200
    # A restart does not hit it again: it is gone.
    assert r.zcard(keys.queue(MODEL)) == 0


@pytest.mark.parametrize("kind", ["list", "empty"])
def test_a_job_value_of_the_wrong_type_or_empty_gets_one_400_then_is_gone(stack, redis_server, prefix, kind):
    """Before: a LIST at the job key failed arq's GET on every lease (retried
    for ever); an empty value was dropped as "expired" with no result."""
    r, keys = redis.Redis.from_url(redis_server.url), Keys(prefix)
    job_id = f"bad-{kind}-{prefix}"
    if kind == "list":
        r.rpush(keys.job(job_id), "not", "a", "job")
    else:
        r.set(keys.job(job_id), b"")
    r.zadd(keys.queue(MODEL), {job_id: now_ms()})
    r.lpush(keys.wake(MODEL), job_id)
    value = wait_until(lambda: r.get(keys.result(job_id)), 20, what="an error result")
    envelope, body = unpack_result(value)
    assert envelope.status == 400 and envelope.id == job_id
    message = json.loads(body)["error"]["message"]
    assert ("list" in message) if kind == "list" else ("empty" in message), message
    gone = (keys.job(job_id), f"{prefix}:in-progress:{job_id}", f"{prefix}:retry:{job_id}")
    wait_until(lambda: r.exists(*gone) == 0 and r.zscore(keys.queue(MODEL), job_id) is None, 20,
               what="the job gone from Redis")
    assert stack.worker_metric("derender_worker_jobs_total", outcome="client_error") == 1
    reason = "job_wrong_type" if kind == "list" else "job_empty"
    assert stack.worker_metric("derender_worker_job_start_failures_total", reason=reason) == 1
    assert derender_one(redis_server.url, prefix, "next")["id"] == "next"


def test_a_wake_key_of_the_wrong_type_is_repaired_and_counted(stack, redis_server, prefix):
    """A wake list only carries hints: a string there is deleted (before: the
    worker logged a warning every poll and never woke on a job again)."""
    r, keys = redis.Redis.from_url(redis_server.url), Keys(prefix)
    r.set(keys.wake(MODEL), "not a list")
    wait_until(lambda: r.type(keys.wake(MODEL)) != b"string", 20, what="the wake key repaired")
    assert stack.worker_metric("derender_worker_wrong_type_keys_total", key="wake") >= 1
    assert derender_one(redis_server.url, prefix, "woken")["id"] == "woken"
    assert health(stack) == 200


def test_a_queue_key_of_the_wrong_type_is_skipped_counted_and_survived(stack, redis_server, prefix):
    """The queue is the record of queued jobs, so a string there is not ours to
    delete: the worker counts it, stays alive and healthy, and serves the
    queue again once it is a queue again."""
    r, keys = redis.Redis.from_url(redis_server.url), Keys(prefix)
    r.set(keys.queue(MODEL), "not a zset")
    wait_until(lambda: stack.worker_metric("derender_worker_wrong_type_keys_total", key="queue") >= 1, 20,
               what="the wrong-typed queue counted")
    assert health(stack) == 200
    assert get_json(stack.url + "/ready")[1]["workers"] == 1
    r.delete(keys.queue(MODEL))
    assert derender_one(redis_server.url, prefix, "repaired")["id"] == "repaired"


class _Runtime:
    """Stands in for JobRuntime: records rejections."""

    def __init__(self) -> None:
        self.rejected: list[tuple] = []

    async def reject(self, job_id: str, queue: str, status: int, message: str, *, claim_keys: tuple = ()) -> None:
        self.rejected.append((job_id, queue, status, message))


async def test_a_job_key_retyped_between_claim_and_read_is_rejected_not_retried(redis_server, prefix, monkeypatch):
    """The claim saw a string; arq's own GET then meets a LIST (WRONGTYPE):
    the job is answered 400 instead of failing in Redis on every lease."""
    import arq.worker
    from redis.asyncio import Redis

    from worker.queue_worker import DerenderWorker

    keys = Keys(prefix)
    for name, value in keys.arq_prefixes.items():  # what use_key_prefix does, undone by monkeypatch
        if hasattr(arq.worker, name):
            monkeypatch.setattr(arq.worker, name, value)
    pool, runtime = Redis.from_url(redis_server.url), _Runtime()
    try:
        worker = DerenderWorker(keys=keys, model=MODEL, pool=pool, ctx={"runtime": runtime})
        await pool.rpush(keys.job("retyped"), "x")
        await pool.zadd(keys.queue(MODEL), {"retyped": 1})
        await worker.run_job("retyped", 1)
        assert [(r[0], r[2]) for r in runtime.rejected] == [("retyped", 400)]
        assert "list" in runtime.rejected[0][3]
    finally:
        await pool.aclose()


def test_a_job_value_that_fails_to_read_in_any_way_becomes_a_malformed_job(monkeypatch):
    """arq drops a job whose deserializer raises, with no result; ours never raises."""
    import worker.queue_worker as queue_worker

    def broken(value: bytes):
        raise RuntimeError("a bug in the wire decoder")

    monkeypatch.setattr(queue_worker, "unpack_job", broken)
    job = queue_worker.deserialize_job(b'{"v":1}\n{}')
    assert job["f"] == "derender" and job["a"][0] is None and "RuntimeError" in job["a"][2]
