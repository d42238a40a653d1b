"""Producers with docs/security.md's ACL (issue 31, items 7-10): what a
producer can write with the grants the page gives it (INCRBY on a lane's
batched counter, LPUSH of any bytes to a lane, SET of any pending key) never
blocks admission, loses another client's job, stalls a worker or Redis, or
puts a body or a result in a log. A real redis-server with the page's
producer user, real API and worker processes."""

from __future__ import annotations

import asyncio
import contextlib
import glob
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from derender_queue.wire.client import DerenderClient
from derender_queue.wire.depth import queue_depth
from derender_queue.wire.envelope import JobEnvelope, pack
from derender_queue.wire.keys import Keys, now_ms
from derender_queue.wire.lanes import Scripts, pack_batch, split_attempt, unpack_batch
from derender_queue.wire.queue import SMALL_JOB_BYTES
from tests.helpers.redis_process import RedisProcess
from tests.helpers.stack import Stack, get_json, metric, post, wait_until
from tests.integration.test_acl import documented_acl

PREFIX, MODEL = "derender", "deepseek-v4"  # the ACL's rule names the default prefix
KEYS = Keys(PREFIX)
LANE, BATCHED = KEYS.lane("s0", MODEL), KEYS.batched("s0", MODEL)
SECRET = "SeCrEt-BoDy-MaRkEr"
"""A request id the answers echo: it must appear in no log line."""
INT64_MAX = 2**63 - 1


def chat_body(tag: str) -> bytes:
    return json.dumps({"generate_response": {"request_id": tag, "choices": [
        {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}]}}).encode()


@contextlib.contextmanager
def producer_stack(tmp_path: Path, workers: int = 1) -> Iterator[tuple[Stack, redis.Redis, redis.Redis, str]]:
    """(stack, admin client, the producer's client, the producer's URL) on a
    private redis-server with the page's producer user."""
    try:
        server = RedisProcess().start()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    admin = redis.Redis.from_url(server.url)
    assert admin.execute_command(*documented_acl()) in (b"OK", "OK")
    url = server.url.replace("redis://", "redis://producer:PASSWORD@")
    s = Stack(server.url, PREFIX, workers=workers, log_dir=str(tmp_path))
    producer = redis.Redis.from_url(url)
    try:
        yield s.start(), admin, producer, url
    finally:
        producer.close()
        s.close()
        server.close()


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    with producer_stack(tmp_path_factory.mktemp("logs")) as parts:
        yield parts


def job(job_id: str, body: bytes = b"") -> tuple[bytes, bytes]:
    """(its pending key's value, its lane value) for a v2 job with reply_to unset."""
    head = pack(JobEnvelope(v=2, id=job_id, endpoint="chat", model=MODEL, enqueued_ms=now_ms()), b"")
    return b"P" + head, head + (body or chat_body(job_id))


def pending(producer: redis.Redis, job_id: str, body: bytes = b"") -> bytes:
    """SET a v2 job's pending key as a producer does; its lane value."""
    marker, value = job(job_id, body)
    producer.set(KEYS.job(job_id), marker, px=600_000)
    return value


def answered(admin: redis.Redis, job_id: str, timeout: float = 20) -> int:
    """The status of a v2 job's result once its worker wrote it."""
    def result() -> int | None:
        value = admin.get(KEYS.job(job_id))
        if value is None or value.startswith(b"P"):
            return None
        return int(json.loads(value.split(b"\n", 1)[0])["status"])
    return int(wait_until(result, timeout, 0.05, f"job {job_id} answered"))


def start_failures(s: Stack, reason: str) -> float:
    return s.worker_metric("derender_worker_job_start_failures_total", reason=reason)


def still_serving(admin: redis.Redis, producer: redis.Redis, tag: str, body: bytes = b"") -> None:
    """The worker still serves: a fresh job is answered 200."""
    job_id = f"s0.{tag}"
    producer.lpush(LANE, pending(producer, job_id, body))
    assert answered(admin, job_id) == 200


def logs(s: Stack) -> str:
    text = ""
    for path in glob.glob(f"{s.log_dir}/*.log"):
        with open(path, encoding="utf-8", errors="replace") as f:
            text += f.read()
    return text


def set_counter(producer: redis.Redis, value: int) -> None:
    """What the ACL lets a producer do to the counter: INCRBY it to `value`."""
    producer.incrby(BATCHED, -int(producer.incrby(BATCHED, 0)))
    producer.incrby(BATCHED, value)


# Item 7: the batched counter.

def test_a_batched_counter_near_its_floor_loses_no_job(tmp_path):
    with producer_stack(tmp_path, workers=0) as (s, admin, producer, url):

        async def submit_many() -> list[str]:
            async with DerenderClient(url, key_prefix=PREFIX) as client:
                return list(await asyncio.gather(*(client.submit("chat", chat_body(f"{SECRET}{i}"), notify=False)
                                                   for i in range(40))))

        ids = asyncio.run(submit_many())
        assert admin.llen(LANE) == 2 and int(admin.get(BATCHED)) == 38  # one alone, one batch of 39
        set_counter(producer, -(2**63) + 1)  # the batch's finish takes 38 off it
        s.start_worker()
        s.wait_ready(1)
        try:
            assert [answered(admin, job_id) for job_id in ids] == [200] * 40
            assert 0 <= int(admin.get(BATCHED) or 0) < 64
        finally:
            s.close()
            assert SECRET not in logs(s)  # item 10: a finish that failed logs no result


def test_a_huge_batched_counter_does_not_block_admission(hostile):
    s, admin, producer, _ = hostile
    set_counter(producer, INT64_MAX)
    try:
        # The API has read the depth since (its watcher, every heartbeat), or a worker has repaired it.
        wait_until(lambda: metric(f"{s.url}/metrics", "derender_queue_depth", model=MODEL) > 0
                   or int(admin.get(BATCHED) or 0) < 64, 20, 0.05, "the depth read")
        status, out, _ = post(f"{s.url}/v1/jobs?endpoint=chat", chat_body("admitted"))
        assert status == 202, (status, out)
        job_id = json.loads(out)["id"]
        wait_until(lambda: get_json(f"{s.url}/v1/jobs/{job_id}")[1]["status"] == "done", 20, 0.05, "done")
        # The workers bring it back into the range the lanes allow (no admin needed).
        wait_until(lambda: int(admin.get(BATCHED) or 0) < 64, 20, 0.05, "the counter repaired")
    finally:
        admin.delete(BATCHED)


@pytest.mark.parametrize("value", [INT64_MAX, -(2**63)])
def test_queue_depth_counts_the_counter_only_within_what_the_lane_holds(value):
    try:
        server = RedisProcess().start()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    admin = redis.Redis.from_url(server.url)

    async def depth() -> int:
        client = redis.asyncio.Redis.from_url(server.url)
        try:
            return await queue_depth(client, KEYS, MODEL)
        finally:
            await client.aclose()

    try:
        assert admin.execute_command(*documented_acl()) in (b"OK", "OK")
        producer = redis.Redis.from_url(server.url.replace("redis://", "redis://producer:PASSWORD@"))
        set_counter(producer, value)
        producer.close()
        assert asyncio.run(depth()) == 0
        admin.lpush(LANE, b"one", b"two")
        assert asyncio.run(depth()) == 2 + (63 * 2 if value > 0 else 0)
        admin.close()
    finally:
        server.close()


# Item 8: frames are bounded before anything is built.

def test_a_frame_header_is_bounded_before_anything_is_built():
    """A 13-byte frame naming 12 million items of length -3 (unpack_batch
    stepped back 3 bytes per item and built them all: seconds of a stalled
    event loop)."""
    frame = unpack_batch(b"*12000000\n-3\n")
    assert len(getattr(frame, "items", frame)) == 0
    assert frame.problem


def test_recover_moves_only_what_a_frame_holds():
    """RECOVER splits a dead worker's batch back into the lane: a junk frame
    pushed 2 million junk values there, blocking Redis for seconds."""
    try:
        server = RedisProcess().start()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    good = [job(f"s0.ok{i}")[1] for i in range(2)]
    values = [b"*2000000\n-3\n", b"#x\n" + good[0], b"*1\n-1\n", pack_batch(good) + b"trailing",
              b"*3\n" + b"".join(b"%d\n" % len(v) + v for v in good) + b"99\nshort",
              b"#2\n*0\n", b"*70\n" + b"".join(b"%d\n" % len(v) + v for v in good * 35)]
    active = KEYS.active("s0", "dead", MODEL, 0)

    async def recover() -> None:
        client = redis.asyncio.Redis.from_url(server.url)
        try:
            await client.rpush(active, *values)
            await client.sadd(KEYS.claims("s0"), active)
            await client.set(BATCHED, 100)
            await Scripts(client).recover(keys=[active, LANE, KEYS.claims("s0"), BATCHED,
                                                KEYS.heavy_lane("s0", MODEL)], args=[SMALL_JOB_BYTES])
        finally:
            await client.aclose()

    try:
        asyncio.run(recover())
        admin = redis.Redis.from_url(server.url)
        lane = [split_attempt(v) for v in admin.lrange(LANE, 0, -1)]
        # The items before each frame's first bad field (70's first 64), marked as their second
        # attempt; a value with a bad attempt mark or frame header is dropped whole.
        assert sorted(lane) == sorted([(2, good[0]), (2, good[1])] * 2 + [(2, good[i % 2]) for i in range(64)])
        assert admin.exists(active) == 0 and admin.scard(KEYS.claims("s0")) == 0
        assert 0 <= int(admin.get(BATCHED)) <= 100
        admin.close()
    finally:
        server.close()


def test_a_frame_naming_millions_of_negative_items_is_one_counted_drop(hostile):
    s, admin, producer, _ = hostile
    before = start_failures(s, "bad_frame")
    producer.lpush(LANE, b"*12000000\n-3\n")
    wait_until(lambda: start_failures(s, "bad_frame") == before + 1, 10, 0.05, "the frame counted")
    still_serving(admin, producer, "after-millions")


# Item 9: every unusable value ends as an error result or a counted, logged drop.

def _items(*values: bytes) -> bytes:
    return b"".join(b"%d\n" % len(v) + v for v in values)


MALFORMED_FRAMES = {
    "bytes past its last item": lambda a, b: pack_batch([a, b]) + b"junk",
    "a count over its items": lambda a, b: b"*5\n" + _items(a, b),
    "a length past its end": lambda a, b: b"*3\n" + _items(a, b) + b"999999\nshort",
    "a negative length": lambda a, b: b"*3\n" + _items(a, b) + b"-3\nxyz",
    "a count over any batch": lambda a, b: b"*100000\n" + _items(a, b),
}


@pytest.mark.parametrize("defect", list(MALFORMED_FRAMES))
def test_a_malformed_frame_answers_its_jobs_and_counts_the_rest(hostile, defect):
    s, admin, producer, _ = hostile
    before = start_failures(s, "bad_frame")
    tag = defect.replace(" ", "-")
    ids = [f"s0.{tag}-{i}" for i in range(2)]
    producer.lpush(LANE, MALFORMED_FRAMES[defect](*(pending(producer, i) for i in ids)))
    assert [answered(admin, i) for i in ids] == [200, 200]
    wait_until(lambda: start_failures(s, "bad_frame") == before + 1, 10, 0.05, "the frame's defect counted")


@pytest.mark.parametrize("batched", [False, True])
def test_a_value_that_is_not_a_job_but_names_one_is_answered_400(hostile, batched):
    s, admin, producer, _ = hostile
    before = start_failures(s, "malformed_job")
    bad, good = f"s0.not-a-job-{batched}", f"s0.beside-it-{batched}"
    pending(producer, bad)
    value = b'{"v":2,"id":"%s","endpoint":"no such endpoint"}\n{}' % bad.encode()
    producer.lpush(LANE, pack_batch([pending(producer, good), value]) if batched else value)
    assert answered(admin, bad) == 400
    if batched:
        assert answered(admin, good) == 200
    assert start_failures(s, "malformed_job") == before + 1


def test_a_lane_value_nested_deep_is_counted_and_dropped(hostile):
    s, admin, producer, _ = hostile
    before = start_failures(s, "unreadable")
    producer.lpush(LANE, b'{"v":2,"id":"s0.deep","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n{}")
    wait_until(lambda: start_failures(s, "unreadable") == before + 1, 10, 0.05, "the value counted")
    wait_until(lambda: not [k for k in admin.scan_iter(f"{PREFIX}:{{s0}}:active:*") if admin.llen(k)],
               10, 0.05, "no claim holds it")
    still_serving(admin, producer, "after-deep")


@pytest.mark.parametrize("job_id", ["no-shard-tag", "s9.another-shard"])
def test_a_lane_job_of_another_shard_is_dropped_not_answered_elsewhere(hostile, job_id):
    s, admin, producer, _ = hostile
    before = start_failures(s, "wrong_shard")
    value = pending(producer, job_id)  # its key: derender:{None}:job:... or derender:{s9}:job:...
    producer.lpush(LANE, value)
    wait_until(lambda: start_failures(s, "wrong_shard") == before + 1, 10, 0.05, "the job counted")
    assert admin.get(KEYS.job(job_id)).startswith(b"P")
    still_serving(admin, producer, f"after-{job_id}")


def test_a_pending_key_nested_deep_reads_as_pending(hostile):
    s, _, producer, _ = hostile
    producer.set(KEYS.job("s0.nested"), b'P{"x":' + b"[" * 1500 + b"]" * 1500 + b"}\n", px=60_000)
    status, body = get_json(f"{s.url}/v1/jobs/s0.nested")
    assert (status, body.get("status")) == (200, "pending"), (status, body)


def test_a_result_nested_deep_is_served_not_a_500(hostile):
    """A producer can overwrite the result of a job whose id it knows
    (docs/security.md): an error body nested too deep is served as written."""
    s, _, producer, _ = hostile
    body = b'{"error":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    producer.set(KEYS.job("s0.nested-result"), b'{"v":1,"id":"s0.nested-result","status":400,"finished_ms":1}\n'
                 + body, px=60_000)
    with urllib.request.urlopen(f"{s.url}/v1/jobs/s0.nested-result", timeout=10) as reply:
        assert reply.status == 200 and body in reply.read()


# Item 10: no log line holds a body or a result.

def test_a_finish_whose_publish_fails_keeps_its_result_and_logs_none(tmp_path):
    """The worker's Redis user may publish on no channel (an admin's mistake):
    the finish script's publish fails after its fence. Before, the script
    errored there (its DEL and SET kept, the claim gone); now the result is
    written, the worker tries the notification again and logs its error alone."""
    with producer_stack(tmp_path, workers=0) as (s, admin, producer, _):
        admin.execute_command("ACL", "SETUSER", "worker", "on", ">WORKER", "~*", "+@all", "resetchannels")
        s.start_worker(DERENDER_REDIS_URL=s.redis_url.replace("redis://", "redis://worker:WORKER@"))
        s.wait_ready(1)
        head = pack(JobEnvelope(v=2, id="s0.unannounced", endpoint="chat", model=MODEL, enqueued_ms=now_ms(),
                                reply_to="nobody-listens"), b"")
        producer.set(KEYS.job("s0.unannounced"), b"P" + head, px=600_000)
        producer.lpush(LANE, head + chat_body(SECRET))
        try:
            assert answered(admin, "s0.unannounced") == 200
            assert SECRET.encode() in admin.get(KEYS.job("s0.unannounced"))
        finally:
            s.close()
            assert SECRET not in logs(s)


def test_no_log_holds_a_body_or_a_result(hostile):
    """Every test above ran its jobs through this module's stack (the floor
    test's stack too: its logs are checked there)."""
    s, admin, producer, _ = hostile
    still_serving(admin, producer, "last", chat_body(SECRET))
    assert SECRET not in logs(s)
