"""Fast unit tests (fakeredis) of the pieces issue 12's API fixes are built
from; the real-process tests are test_api_malformed/jobs/limits.py."""

from __future__ import annotations

import asyncio
import os
import platform
import subprocess
import sys
from pathlib import Path

import fakeredis
import pytest

from api.inflight import InflightBudget, Ledger, StreamBytes
from api.owner import OwnerSeal
from derender_queue.contract.model_name import requested_model
from derender_queue.errors import DerenderError
from derender_queue.wire.envelope import ENVELOPE_PEEK_BYTES, JobEnvelope, pack, peek_job
from derender_queue.wire.heartbeat import Heartbeat, live_workers
from derender_queue.wire.keys import Keys, now_ms
from derender_queue.wire.lanes import PENDING
from derender_queue.wire.queue import JobQueue, Slot
from derender_queue.wire.waiter import ResultWaiter


@pytest.fixture
def redis():
    return fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())


def test_budget_refuses_beyond_the_limit_but_never_a_request_alone():
    budget = InflightBudget(limit=100)
    first, second = Ledger(budget), Ledger(budget)
    first.take(150, "a")  # alone: admitted although over the limit
    with pytest.raises(DerenderError) as refused:
        second.take(1, "b")
    assert refused.value.status == 503
    first.take(10, "a")  # still alone: its own bytes do not count against it
    assert first.release() == 160 and budget.total == 0
    second.take(60, "b")
    second.take(40, "b")
    with pytest.raises(DerenderError):
        Ledger(budget).take(1, "c")


def test_per_key_quota_is_per_key():
    budget = InflightBudget(per_key=100)
    Ledger(budget).take(80, "alice")
    with pytest.raises(DerenderError):
        Ledger(budget).take(30, "alice")
    Ledger(budget).take(80, "bob")
    Ledger(budget).force(500, "alice")  # results are never refused
    assert budget.by_key == {"alice": 580, "bob": 80}


async def test_a_streams_read_ahead_waits_for_room_in_the_budget():
    """Issue 31 item 12: SSE chunks read ahead of the one being answered count
    in the budget; without room the reader waits for answered chunks'
    bytes, and its next chunk, with none ahead, is taken as any body."""
    budget = InflightBudget(limit=20)
    Ledger(budget).take(4, "other")
    held = StreamBytes(Ledger(budget), "me")
    await held.take(5)  # nothing ahead: admitted as any body (9 <= 20)
    held.queued = 5  # ... and handed on to be answered
    await held.take(1)  # reading ahead while the budget stays half full (10 <= 10)
    ahead = asyncio.create_task(held.take(3))  # 13 > 10: waits
    await asyncio.sleep(0)
    assert not ahead.done() and budget.total == 10
    held.free_to(5)  # answered
    await asyncio.wait_for(ahead, 5)  # nothing ahead now: taken as any body
    assert budget.total == 8 and budget.by_key == {"other": 4, "me": 4}
    with pytest.raises(DerenderError) as refused:  # nothing ahead and no room: a 503, as for any body
        await held.take(13)
    assert refused.value.status == 503


@pytest.mark.parametrize("body", [
    b'{"x": ' + b"[" * 5000 + b"]" * 5000 + b', "model": "m"}',
    b'{"model": "a\\qb"}', b'{"model": "\\ud800"}', b'{"model": "\xff\xfe"}', b'{"x": 1, "model": "\\udfff"}',
    b'{"x": NaN, "model": "\\ud800"}', b'{"x": NaN, ' + b"[" * 5000 + b"]" * 5000 + b"}",
])
def test_any_bytes_are_a_400(body):
    with pytest.raises(DerenderError) as refused:
        requested_model(body)
    assert refused.value.status == 400


def test_model_is_found_without_copying_whitespace_heavy_bodies():
    assert requested_model(b" " * 10_000 + b'{"a": 1, "model": "m"}' + b"\n" * 10_000) == "m"
    assert requested_model(b'{"model": "m", "a": 1}') == "m"


async def test_idempotency_slot_is_bound_in_the_enqueueing_script(redis):
    keys = Keys("u")
    queue = JobQueue(redis, keys)
    slot = Slot(queue.idempotency_key("s", "ab" * 32), "chat:abc", 60)
    first, second = queue.id_for_slot(slot.key), queue.id_for_slot(slot.key)
    job_id, bound = await queue.submit_once(slot, "chat", b"{}", "m", job_id=first)
    assert (job_id, bound) == (first, None)
    assert await redis.exists(keys.job(first)) and await queue.depth("m") == 1
    assert await queue.submit_once(slot, "chat", b"{}", "m", job_id=second) == (first, "chat:abc")
    assert not await redis.exists(keys.job(second)) and await queue.depth("m") == 1


async def test_lookup_reads_owner_from_the_pending_envelope(redis):
    keys = Keys("u")
    queue = JobQueue(redis, keys)
    envelope = JobEnvelope(v=2, id="s0.j", endpoint="chat", model="m", enqueued_ms=now_ms(), owner="o",
                           owner_sig="s")
    await redis.set(keys.job("s0.j"), PENDING + pack(envelope, b""))
    found = await queue.lookup("s0.j")
    assert found.pending and found.result is None and found.job is not None and found.job.owner == "o"
    assert (await queue.lookup("s0.nope")).pending is False
    assert peek_job(b'{"v":1' + b" " * ENVELOPE_PEEK_BYTES) is None


async def test_owner_seal_binds_job_and_owner(redis):
    seal = OwnerSeal(redis, Keys("u"))
    sig = await seal.sign("job1", "alice")
    assert await seal.owner("job1", "alice", sig) == "alice"
    assert await seal.owner("job2", "alice", sig) is None
    assert await seal.owner("job1", "bob", sig) is None
    assert await seal.owner("job1", "alice", "é" * 64) is None
    assert await OwnerSeal(redis, Keys("u")).owner("job1", "alice", sig) == "alice"  # shared via Redis
    assert await OwnerSeal(redis, Keys("u"), "configured").owner("job1", "alice", sig) is None


async def test_undecodable_heartbeats_are_skipped(redis):
    import msgspec

    keys = Keys("u")
    good = Heartbeat("w1", "h", 1, {"m": "sha"}, 4, now_ms())
    for worker, value in (("w1", msgspec.json.encode(good)), ("w2", b'{"id": 2}'), ("w3", b"\xff")):
        await redis.zadd(keys.workers, {worker: now_ms() + 60_000})
        await redis.set(keys.worker(worker), value)
    bad: list[str] = []
    assert [b.id for b in await live_workers(redis, keys, lambda w, e: bad.append(w))] == ["w1"]
    assert sorted(bad) == ["w2", "w3"]


async def test_result_subscription_survives_a_notification_it_cannot_read(redis):
    keys = Keys("u")
    failed: list[str] = []
    waiter = ResultWaiter(redis, keys, on_error=failed.append)
    await waiter.start()
    try:
        waiter.expect("j")
        await redis.publish(keys.done(waiter.reply_to), b"\xff\xfe")
        await redis.publish(keys.done(waiter.reply_to), b"j")
        await asyncio.wait_for(waiter._pending["j"].wait(), 10)
        assert failed == ["result-waiter"]
    finally:
        await waiter.close()


_MEMORY_POLICY = """
import ctypes.util, os, sys
from api import memory

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

memory.tune()
start = rss()
block = b"\\1" * (6 << 20)
del block
kept = rss() - start
block = b"\\1" * (16 << 20)
held = rss() - start
del block
after_large = rss() - start
memory.released(memory.TRIM_AFTER_BYTES, 0)
print(kept, held, after_large, rss() - start)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/statm") or platform.libc_ver()[0] != "glibc",
                    reason="glibc's allocator on Linux")
def test_request_sized_blocks_reuse_the_heap_and_the_rest_goes_back_to_the_os():
    """A 6 MB block (a 4000-token top-20 body) stays in the heap for the next
    request, which then writes it without faulting each page in; a 16 MB one
    is handed back at once; a trim hands back the rest (api/memory.py)."""
    out = subprocess.run([sys.executable, "-c", _MEMORY_POLICY], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    kept, held, after_large, trimmed = (int(v) >> 20 for v in out.stdout.split())
    assert kept >= 5, out.stdout  # pinned at 1 MiB, it was unmapped: 0
    assert held >= kept + 15, out.stdout
    assert after_large <= kept + 1, out.stdout
    assert trimmed <= 1, out.stdout
