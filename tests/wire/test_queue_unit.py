"""Queue logic on fakeredis (fast; the integration tests use a real server)."""

from __future__ import annotations

import asyncio

import fakeredis
import pytest

from derender_queue.wire.envelope import (
    INLINE_RESULT_BYTES,
    VERSION,
    ResultEnvelope,
    WireError,
    notification,
    pack,
    parse_notification,
    result_view,
    unpack_job,
)
from derender_queue.wire.keys import Keys, now_ms
from derender_queue.wire.lanes import PENDING
from derender_queue.wire.queue import JobQueue
from derender_queue.wire.waiter import ResultWaiter


@pytest.fixture
def redis():
    return fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())


def test_job_round_trips_through_the_wire_format():
    body = b'{"generate_response": {"choices": []}}'
    from derender_queue.wire.envelope import JobEnvelope

    value = pack(JobEnvelope(v=VERSION, id="j1", endpoint="chat", model="m", enqueued_ms=5), body)
    envelope, out = unpack_job(value)
    assert (envelope.id, envelope.endpoint, envelope.model, out) == ("j1", "chat", "m", body)
    assert value.count(b"\n") == 1


V3_JOB = b'{"v":3,"id":"x","endpoint":"chat","model":"m","enqueued_ms":1}\n{}'


@pytest.mark.parametrize("value", [b"", b"no newline", b"{}\n{}", V3_JOB])
def test_malformed_jobs_are_wire_errors(value):
    with pytest.raises(WireError):
        unpack_job(value)


def test_small_results_ride_inline_in_the_notification():
    small = pack(ResultEnvelope(v=1, id="j", status=200, finished_ms=1), b"{}")
    assert parse_notification(notification("j", small)) == ("j", small)
    big = b"x" * (INLINE_RESULT_BYTES + 1)
    assert parse_notification(notification("j", big)) == ("j", None)


async def test_submit_stores_the_pending_job_and_queues_it_in_its_lane(redis):
    keys = Keys("p")
    queue = JobQueue(redis, keys)
    job_id = await queue.submit("chat", b"{}", "m", deadline_ms=now_ms() + 5000)
    pending = await redis.get(keys.job(job_id))
    assert pending.startswith(PENDING)
    assert 0 < await redis.pttl(keys.job(job_id)) <= 3_600_000
    envelope, body = unpack_job(await redis.lindex(keys.lane("s0", "m"), 0))
    assert (envelope.id, envelope.model, body) == (job_id, "m", b"{}")
    assert await queue.depth("m") == 1
    assert await queue.cancel(job_id, "m") and not await queue.cancel(job_id, "m")
    assert not await redis.exists(keys.job(job_id))


async def test_waiter_wakes_on_notification_and_falls_back_to_get(redis, monkeypatch):
    keys = Keys("p")
    queue = JobQueue(redis, keys)
    waiter = ResultWaiter(redis, keys)
    await waiter.start()
    try:
        value = pack(ResultEnvelope(v=1, id="s0.a", status=200, finished_ms=1), b'{"ok":1}')
        waiter.expect("s0.a")
        await redis.set(keys.job("s0.a"), value)
        await redis.publish(keys.done(waiter.reply_to), notification("s0.a", value))
        envelope, body = await asyncio.wait_for(waiter.wait(queue, "s0.a", 5), 2)
        assert body == b'{"ok":1}'
        await asyncio.sleep(0.05)
        assert not await redis.exists(keys.job("s0.a"))  # delivered results are deleted
        # A lost notification: the fallback GET still finds the result.
        monkeypatch.setattr("derender_queue.wire.waiter.FALLBACK_POLL_S", 0.05)
        await redis.set(keys.job("s0.b"), pack(ResultEnvelope(v=1, id="s0.b", status=400, finished_ms=1), b"{}"))
        envelope, _ = await waiter.wait(queue, "s0.b", 2)
        assert envelope.status == 400
        assert await waiter.wait(queue, "s0.c", 0.1) is None
    finally:
        await waiter.close()


def test_result_view_rejects_garbage():
    with pytest.raises(WireError):
        result_view(b"garbage")


async def test_a_read_whose_reply_is_lost_does_not_destroy_the_result(redis, monkeypatch):
    """Redis going down can execute a command and drop its reply (seen in the soak
    test as one lost job when the waiter still used GETDEL): the fallback read must
    leave the result in place until it is held, then delete it."""
    from redis.exceptions import ConnectionError

    keys = Keys("p")
    queue = JobQueue(redis, keys)
    waiter = ResultWaiter(redis, keys)
    await waiter.start()
    monkeypatch.setattr("derender_queue.wire.waiter.FALLBACK_POLL_S", 0.05)
    real_get, calls = redis.get, []

    async def get_then_lose_the_reply(name):
        value = await real_get(name)
        calls.append(name)
        if len(calls) == 1:
            raise ConnectionError("Connection closed by server.")
        return value

    monkeypatch.setattr(redis, "get", get_then_lose_the_reply)
    try:
        value = pack(ResultEnvelope(v=1, id="s0.a", status=200, finished_ms=1), b'{"ok":1}')
        await redis.set(keys.job("s0.a"), value)
        waiter.expect("s0.a")
        _, body = await asyncio.wait_for(waiter.wait(queue, "s0.a", 5), 3)
        assert body == b'{"ok":1}' and len(calls) == 2
        await asyncio.sleep(0.05)
        assert not await redis.exists(keys.job("s0.a"))  # deleted once delivered
    finally:
        await waiter.close()
