"""Wire format v1 was removed in 0.2.0: a v1 job left in Redis after the
upgrade (written by a v1 producer, exactly as its recipe wrote it: the job
key, the queue ZSET, the wake list, in one MULTI) is answered with a clear
error result where the v1 producer reads it, and announced on its reply
channel; it is not run, and not lost silently (worker/v1_leftovers.py).
Against a real redis-server, with the new worker started after the job was
written."""

from __future__ import annotations

import asyncio
import json

from redis.asyncio import Redis

from derender_queue.settings import Settings
from derender_queue.wire.envelope import parse_notification, result_view
from derender_queue.wire.keys import now_ms
from worker.main import serve

MODEL = "deepseek-v4"
BODY = (b'{"generate_response":{"request_id":"r1","choices":[{"index":0,"token_ids":[19923,14,2058,3,1],'
        b'"finish_reason":"stop"}]}}')


async def _v1_produce(r: Redis, prefix: str, job_id: str, value: bytes) -> None:
    """What a v1 producer sent (the raw-producer recipe of 0.1.0's docs/wire-format.md)."""
    now = now_ms()
    async with r.pipeline(transaction=True) as pipe:
        pipe.set(f"{prefix}:job:{job_id}", value, px=3_600_000)
        pipe.zadd(f"{prefix}:queue:{MODEL}", {job_id: now})
        pipe.lpush(f"{prefix}:wake:{MODEL}", job_id)
        pipe.ltrim(f"{prefix}:wake:{MODEL}", 0, 63)
        await pipe.execute()


async def _until(check, timeout_s: float = 30.0):
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not (value := await check()):
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)
    return value


async def test_a_v1_job_left_in_redis_is_answered_with_an_error(redis_server, prefix, registry):
    r = Redis.from_url(redis_server.url)
    envelope = {"v": 1, "id": "legacy1", "endpoint": "chat", "model": MODEL, "enqueued_ms": now_ms(),
                "reply_to": "old-client"}
    await _v1_produce(r, prefix, "legacy1", json.dumps(envelope).encode() + b"\n" + BODY)
    await _v1_produce(r, prefix, "legacy2", b"not even an envelope")  # no reply_to: read by its id
    pubsub = r.pubsub()
    await pubsub.subscribe(f"{prefix}:done:old-client")
    settings = Settings(key_prefix=prefix, redis_url=redis_server.url, heartbeat_s=0.5)
    pool, stop = Redis.from_url(redis_server.url), asyncio.Event()
    worker = asyncio.create_task(serve(settings, registry, pool, stop=stop))
    try:
        for job_id in ("legacy1", "legacy2"):
            value = await _until(lambda job_id=job_id: r.get(f"{prefix}:result:{job_id}"))
            result, body = result_view(value)
            error = json.loads(bytes(body))["error"]
            assert (result.id, result.status, error["code"]) == (job_id, 400, 400), (result, error)
            assert "wire format v1 is no longer served" in error["message"], error
            assert "was not run" in error["message"] and "v2" in error["message"]
        message = await _until(lambda: pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1))
        assert parse_notification(message["data"])[0] == "legacy1"
        assert result_view(parse_notification(message["data"])[1])[0].status == 400
        assert await r.zcard(f"{prefix}:queue:{MODEL}") == 0
        assert not await r.exists(f"{prefix}:job:legacy1", f"{prefix}:job:legacy2")
        # A v1 producer still running after the upgrade is answered too (the next pass).
        await _v1_produce(r, prefix, "legacy3", json.dumps({**envelope, "id": "legacy3"}).encode() + b"\n" + BODY)
        value = await _until(lambda: r.get(f"{prefix}:result:legacy3"))
        assert result_view(value)[0].status == 400
    finally:
        stop.set()
        assert await asyncio.wait_for(worker, 30) is True
        await pubsub.aclose()
        await pool.aclose()
        await r.aclose()


def test_the_embedded_redis_runs_lua():
    """`derender run` without DERENDER_REDIS_URL serves v2 on fakeredis: its
    scripts need the `lua` extra (lupa), a dependency of the package."""
    import fakeredis

    async def check() -> object:
        return await fakeredis.FakeAsyncRedis().eval("return 1", 0)

    assert asyncio.run(check()) == 1
