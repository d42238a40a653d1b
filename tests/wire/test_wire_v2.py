"""Wire format v2 (issue 15 item 1): the lifecycle's guarantees, on a real
Redis with real worker and API processes.

- answers are byte for byte the in-process derender's;
- a killed worker's job is recovered and answered once; a job whose
  workers keep dying is answered with an error after DERENDER_MAX_TRIES;
- a finish whose claim was recovered writes nothing (the fence);
- a withdrawn job is never answered; Idempotency-Key binds one job;
- SIGTERM drains held v2 jobs; queued v2 jobs survive a Redis restart;
- v1 jobs left in Redis are answered with an error (tests/worker/test_v1_leftovers.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import time
from collections.abc import Callable
from types import SimpleNamespace

import pytest
import redis

from derender_queue.wire.client import DerenderClient
from derender_queue.wire.connection import async_client
from derender_queue.wire.envelope import JobEnvelope, ResultEnvelope, pack, parse_notifications, result_view
from derender_queue.wire.keys import Keys, now_ms
from derender_queue.wire.lanes import FINISH, FINISH_LARGE, RECOVER, Scripts, split_attempt
from derender_queue.wire.queue import JobQueue
from derender_queue.wire.replication import Durability
from tests.helpers.redis_process import RedisProcess, free_port
from tests.helpers.sentinel_process import role
from tests.helpers.stack import Stack, get_json, metric, post, stop, wait_until
from worker.jobs import JobRuntime
from worker.lane_server import LaneServer, Outage

MODEL = "deepseek-v4"
V2: dict[str, str] = {}
"""Nothing to set since 0.2.0 (v2 is the only wire format); kept for the helpers' `env` argument."""
FAST_RECOVERY = {"DERENDER_HEARTBEAT_S": "0.5"}
"""A killed worker's heartbeat expires after three beats: 1.5 s."""


def chat_body(tag: str, tokens: int = 5) -> bytes:
    ids = ([19923, 14, 2058, 3, 1] * tokens)[:tokens]
    return json.dumps({"generate_response": {"request_id": tag, "choices": [
        {"index": 0, "token_ids": ids, "finish_reason": "stop"}]}}).encode()


def submit(stack: Stack, body: bytes, headers: dict[str, str] | None = None) -> str:
    status, out, _ = post(f"{stack.url}/v1/jobs?endpoint=chat", body, headers)
    assert status == 202, (status, out)
    return str(json.loads(out)["id"])


def job_state(stack: Stack, job_id: str) -> dict:
    return get_json(f"{stack.url}/v1/jobs/{job_id}")[1]


def held(r: redis.Redis, prefix: str) -> list[bytes]:
    """Job values in any claim slot's active list."""
    return [v for key in r.scan_iter(f"{prefix}:{{s0}}:active:*") for v in r.lrange(key, 0, -1)]


async def _answers(url: str, prefix: str, bodies: list[bytes]) -> list[tuple[int, bytes]]:
    async with DerenderClient(url, key_prefix=prefix) as client:
        out = []
        for body in bodies:
            job_id = await client.submit("chat", body)
            result = await client.wait(job_id)
            out.append((result.status, result.body))
        return out


def test_v2_answers_byte_for_byte_as_the_in_process_derender(redis_server, prefix, registry):
    # 30,000 tokens: a heavy job whose answer (~130 KiB) is too large to announce (finish_large)
    from derender_queue.core import Derenderer
    from worker.cpu_pool import compute

    bodies = [chat_body("a"), chat_body("b", 300), chat_body("c", 30_000), b'{"generate_response": {}}', b"not json"]
    s = Stack(redis_server.url, prefix, workers=1).start()
    try:
        v2 = asyncio.run(_answers(redis_server.url, prefix, bodies))
    finally:
        s.close()
    local = Derenderer(registry)
    expected = [compute(local, "chat", body, MODEL)[:2] for body in bodies]
    assert [status for status, _ in v2] == [200, 200, 200, 400, 400]
    assert len(v2[2][1]) > 64 * 1024
    assert [_timeless(answer) for answer in v2] == [_timeless((status, bytes(out))) for status, out in expected]


def _timeless(answer: tuple[int, bytes]) -> tuple[int, bytes]:
    """The answer with its `created` second zeroed (the runs straddle seconds)."""
    status, body = answer
    return status, re.sub(rb'"created":\d+', b'"created":0', body)


async def _many(url: str, prefix: str, jobs: int, batching: bool) -> list[str]:
    async with DerenderClient(url, key_prefix=prefix, batching=batching) as client:
        answers = await asyncio.gather(*(client.derender_chat(chat_body(f"m{i}", 1 + i % 5), timeout=20)
                                         for i in range(jobs)))
    return [a["choices"][0]["message"]["content"] for a in answers]


@pytest.mark.parametrize("batching", [False, True])
def test_more_jobs_in_flight_than_claim_slots_are_all_answered(redis_server, prefix, batching):
    """A worker with 2 claim slots and 40 jobs at once, twice: every job is
    answered, in order of its own body (the claim loop died once its slots
    ran out: arq's semaphore has one permit more than max_jobs)."""
    s = Stack(redis_server.url, prefix, workers=1, extra_env={"DERENDER_CONCURRENCY": "2"}).start()
    try:
        for _ in range(2):
            answers = asyncio.run(_many(redis_server.url, prefix, 40, batching))
            expected = asyncio.run(_answers(redis_server.url, prefix, [chat_body("x", 1 + i % 5) for i in range(5)]))
            texts = [json.loads(body)["choices"][0]["message"]["content"] for _, body in expected]
            assert answers == [texts[i % 5] for i in range(40)]
        assert s.worker_metric("derender_worker_job_loop_errors_total") == 0
    finally:
        s.close()


def test_a_killed_workers_v2_job_is_recovered_and_answered_once(redis_server, prefix):
    env = {**V2, **FAST_RECOVERY}
    s = Stack(redis_server.url, prefix, workers=0, extra_env=env).start()
    r = redis.Redis.from_url(redis_server.url)
    try:
        doomed = s.start_worker(DERENDER_DEBUG_JOB_DELAY_S="30")
        job_id = submit(s, chat_body("recover"))
        wait_until(lambda: len(held(r, prefix)) == 1, 30, 0.05, "the job claimed")
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        s.start_worker()
        done = wait_until(lambda: (b := job_state(s, job_id))["status"] == "done" and b, 30, 0.1, "answered")
        assert done["http_status"] == 200
        assert held(r, prefix) == [] and r.llen(Keys(prefix).lane("s0", MODEL)) == 0
        survivor = f"http://127.0.0.1:{s.metrics_ports[-1]}/metrics"
        assert metric(survivor, "derender_worker_jobs_total") == 1  # the survivor ran it, once
    finally:
        s.close()


def test_a_v2_job_whose_workers_keep_dying_ends_with_an_error_result(redis_server, prefix):
    r = redis.Redis.from_url(redis_server.url)
    poison_is_cut_off(redis_server.url, prefix, lambda: held(r, prefix), V2)


def poison_is_cut_off(url: str, prefix: str, held_now: Callable[[], list[bytes]], env: dict[str, str]) -> None:
    """A job whose worker is killed twice (DERENDER_MAX_TRIES=2) is answered
    with the 500, and the next job is served (also on a cluster)."""
    env = {**env, **FAST_RECOVERY, "DERENDER_DEBUG_JOB_DELAY_S": "30", "DERENDER_MAX_TRIES": "2"}
    s = Stack(url, prefix, workers=0, extra_env=env).start()
    try:
        job_id = submit(s, chat_body("poison"))
        for attempt in (1, 2):
            worker = s.start_worker()
            wait_until(lambda attempt=attempt: [split_attempt(v)[0] for v in held_now()] == [attempt],
                       30, 0.05, f"attempt {attempt} claimed")
            worker.send_signal(signal.SIGKILL)
            worker.wait()
        s.start_worker(DERENDER_DEBUG_JOB_DELAY_S="0")
        done = wait_until(lambda: (b := job_state(s, job_id))["status"] in ("error", "done") and b, 60, 0.1,
                          "the job answered")
        assert done["http_status"] == 500, done
        assert "abandoned after 2 attempts" in done["error_response"]["error"]["message"]
        status, _, _ = post(s.url + "/v1/chat/completions/derender", chat_body("next"))
        assert status == 200
    finally:
        s.close()


def test_a_finish_whose_claim_was_recovered_writes_nothing(redis_server, prefix):
    """The fence, on the scripts themselves: worker A claims, is taken for
    dead (RECOVER), then finishes late; B's claim of the recovered value is
    the one whose finish counts."""
    r = redis.Redis.from_url(redis_server.url)
    keys = Keys(prefix)
    lane, job = keys.lane("s0", MODEL), keys.job("s0.fence")
    a, b = keys.active("s0", "A", MODEL, 0), keys.active("s0", "B", MODEL, 0)
    r.set(job, b"P{}\n", px=60_000)
    r.lpush(lane, b"value")
    assert r.blmove(lane, a, 1, "RIGHT", "LEFT") == b"value"
    finish, recover = r.register_script(FINISH), r.register_script(RECOVER)
    recovered = [a, lane, keys.claims("s0"), keys.batched("s0", MODEL), keys.heavy_lane("s0", MODEL)]
    assert recover(keys=recovered, args=[32 * 1024]) == [1, 0]  # moved, dropped
    assert finish(keys=[a, job], args=[b"late", 60_000, "", "1", "s0.fence"]) == 0
    assert r.get(job) == b"P{}\n"
    taken = r.blmove(lane, b, 1, "RIGHT", "LEFT")
    assert split_attempt(taken) == (2, b"value")
    assert finish(keys=[b, job], args=[b"result", 60_000, "", "1", "s0.fence"]) == 1
    assert r.get(job) == b"result"
    assert finish(keys=[b, job], args=[b"again", 60_000, "", "1", "s0.fence"]) == 0  # a retried finish
    assert r.get(job) == b"result"


def test_a_large_result_is_renamed_into_place_under_the_same_fence(redis_server, prefix):
    """finish_large: the result SET beside the script (its out key), renamed
    onto the job key only while the claim holds and the job is pending."""
    r = redis.Redis.from_url(redis_server.url)
    keys = Keys(prefix)
    finish = r.register_script(FINISH_LARGE)
    active, job, out = keys.active("s0", "A", MODEL, 0), keys.job("s0.big"), keys.out("s0.big")
    r.set(job, b"P{}\n", px=60_000)
    r.rpush(active, b"value")
    assert finish(keys=[active, job, out], args=["", "s0.big"]) == -1  # its SET failed: nothing changes
    assert r.lrange(active, 0, -1) == [b"value"] and r.get(job) == b"P{}\n"
    r.set(out, b"big result", px=60_000)
    assert finish(keys=[active, job, out], args=["", "s0.big"]) == 1
    assert r.get(job) == b"big result" and r.exists(out, active) == 0 and 0 < r.pttl(job) <= 60_000
    r.set(out, b"again", px=60_000)
    assert finish(keys=[active, job, out], args=["", "s0.big"]) == 0  # a retried finish: the claim is gone
    assert r.get(job) == b"big result" and r.exists(out) == 0
    r.delete(job)  # withdrawn
    r.rpush(active, b"value")
    r.set(out, b"late", px=60_000)
    assert finish(keys=[active, job, out], args=["", "s0.big"]) == 2
    assert r.exists(job, out, active) == 0


def test_a_withdrawn_v2_job_is_never_answered(redis_server, prefix):
    s = Stack(redis_server.url, prefix, workers=0, extra_env=V2).start()
    r = redis.Redis.from_url(redis_server.url)
    try:
        withdrawn, heavy = submit(s, chat_body("gone")), submit(s, chat_body("gone heavy", 9000))
        kept = submit(s, chat_body("kept"))

        async def cancel(job_id: str) -> bool:
            client = redis.asyncio.Redis.from_url(redis_server.url)
            try:
                return await JobQueue(client, Keys(prefix)).cancel(job_id, MODEL)
            finally:
                await client.aclose()

        assert asyncio.run(cancel(withdrawn)) is True and asyncio.run(cancel(heavy)) is True
        s.start_worker()
        wait_until(lambda: job_state(s, kept)["status"] == "done", 30, 0.1, "the kept job answered")
        lanes = (Keys(prefix).lane("s0", MODEL), Keys(prefix).heavy_lane("s0", MODEL))
        wait_until(lambda: held(r, prefix) == [] and not any(r.llen(lane) for lane in lanes), 30, 0.05, "lanes empty")
        for job_id in (withdrawn, heavy):
            assert get_json(f"{s.url}/v1/jobs/{job_id}")[0] == 404
            assert r.exists(Keys(prefix).job(job_id)) == 0
        # The light one ran (its result then had nowhere to go); the heavy one was dropped unrun.
        assert s.worker_metric("derender_worker_execution_seconds_count") == 2
    finally:
        s.close()


def test_an_idempotency_key_binds_one_v2_job(redis_server, prefix):
    s = Stack(redis_server.url, prefix, workers=1, extra_env=V2).start()
    try:
        first = submit(s, chat_body("idem"), {"Idempotency-Key": "k1"})
        again = submit(s, chat_body("idem"), {"Idempotency-Key": "k1"})
        assert first == again and first.startswith("s0.")
        wait_until(lambda: job_state(s, first)["status"] == "done", 30, 0.1, "answered")
        status, out, _ = post(f"{s.url}/v1/jobs?endpoint=chat", chat_body("other"), {"Idempotency-Key": "k1"})
        assert status == 409, out
        assert s.worker_metric("derender_worker_jobs_total") == 1
    finally:
        s.close()


def test_sigterm_drains_held_v2_jobs(redis_server, prefix):
    r = redis.Redis.from_url(redis_server.url)
    sigterm_drains_held_jobs(redis_server.url, prefix, lambda: held(r, prefix), V2)


def sigterm_drains_held_jobs(url: str, prefix: str, held_now: Callable[[], list[bytes]],
                             env: dict[str, str]) -> None:
    """SIGTERM: the worker stops claiming, finishes its 3 held jobs, exits 0 (also on a cluster)."""
    s = Stack(url, prefix, workers=0, extra_env=env).start()
    try:
        worker = s.start_worker(DERENDER_DEBUG_JOB_DELAY_S="1.5")
        s.wait_ready(1)
        ids = [submit(s, chat_body(f"d{i}")) for i in range(3)]
        wait_until(lambda: len(held_now()) == 3, 30, 0.05, "all three claimed")
        assert stop(worker) == 0
        assert [job_state(s, i)["status"] for i in ids] == ["done"] * 3
        assert held_now() == []
    finally:
        s.close()


def test_queued_v2_jobs_survive_a_redis_restart(prefix):
    server = RedisProcess(appendonly=True).start()
    s = Stack(server.url, prefix, workers=0, extra_env=V2).start()
    try:
        queued = [submit(s, chat_body(f"q{i}")) for i in range(5)]
        r = redis.Redis.from_url(server.url)
        assert r.llen(Keys(prefix).lane("s0", MODEL)) == 5
        server.stop()
        server.start()
        wait_until(lambda: get_json(s.url + "/ready")[0] in (200, 503) and r.ping(), 10, 0.1, "Redis back")
        s.start_worker()
        for job_id in queued:
            wait_until(lambda job_id=job_id: job_state(s, job_id)["status"] == "done", 30, 0.1, "queued job done")
    finally:
        s.close()
        server.close()


def test_a_light_job_is_claimed_while_heavy_ones_wait(redis_server, prefix):
    """Heavy jobs (over 32 KiB) have a lane and a claim loop of their own, and
    may hold half the claim slots: a light job submitted behind three heavy
    ones is claimed at once."""
    s = Stack(redis_server.url, prefix, workers=0,
              extra_env={**V2, "DERENDER_CONCURRENCY": "2", "DERENDER_DEBUG_JOB_DELAY_S": "3"}).start()
    r = redis.Redis.from_url(redis_server.url)
    keys = Keys(prefix)
    try:
        heavy = [submit(s, chat_body(f"h{i}", 9000)) for i in range(3)]
        light = submit(s, chat_body("light"))
        assert r.llen(keys.heavy_lane("s0", MODEL)) == 3 and r.llen(keys.lane("s0", MODEL)) == 1
        s.start_worker()
        claimed = wait_until(lambda: len(held(r, prefix)) == 2 and held(r, prefix), 30, 0.05, "two claims")
        sizes = sorted(len(v) > 32 * 1024 for v in claimed)
        assert sizes == [False, True]  # one light, one heavy: the heavy loop holds half the slots
        assert r.llen(keys.heavy_lane("s0", MODEL)) == 2
        for job_id in (light, *heavy):
            wait_until(lambda job_id=job_id: job_state(s, job_id)["status"] == "done", 60, 0.1, "answered")
    finally:
        s.close()


def test_v2_job_ids_name_their_shard_and_results_replace_the_job(redis_server, prefix):
    s = Stack(redis_server.url, prefix, workers=1, extra_env=V2).start()
    r = redis.Redis.from_url(redis_server.url)
    try:
        job_id = submit(s, chat_body("shape"))
        assert job_id.startswith("s0.")
        wait_until(lambda: job_state(s, job_id)["status"] == "done", 30, 0.1, "answered")
        value = r.get(Keys(prefix).job(job_id))
        assert result_view(value)[0].id == job_id
        assert r.exists(Keys(prefix).v1_result(job_id), Keys(prefix).v1_job(job_id)) == 0  # nothing under v1's keys
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and r.pttl(Keys(prefix).job(job_id)) > 600_000:
            time.sleep(0.05)
        assert 0 < r.pttl(Keys(prefix).job(job_id)) <= 600_000  # the result TTL, not the job's
    finally:
        s.close()


# Dynamic batching (issue 15 item 3): jobs that arrive while a submit is in
# flight go as one batch; gather() makes that happen: the first submit is in
# flight while the others are called.

async def _submit_together(url: str, prefix: str, bodies: list[bytes], **submit: object) -> list[str]:
    async with DerenderClient(url, key_prefix=prefix, batching=True) as client:
        return list(await asyncio.gather(*(client.submit("chat", body, notify=False, **submit) for body in bodies)))


def _lpushes(r: redis.Redis) -> int:
    return int(r.info("commandstats").get("cmdstat_lpush", {}).get("calls", 0))


def test_queue_depth_counts_batched_jobs_not_batches(redis_server, prefix):
    s = Stack(redis_server.url, prefix, workers=0, extra_env=V2).start()
    r = redis.Redis.from_url(redis_server.url)
    try:
        asyncio.run(_submit_together(redis_server.url, prefix, [chat_body(f"b{i}") for i in range(20)]))
        assert r.llen(Keys(prefix).lane("s0", MODEL)) == 2  # the first alone, then one batch of 19
        status, ready = get_json(s.url + "/status.json")
        assert status == 200, ready
        assert [q["depth"] for q in ready["queues"] if q["model"] == MODEL] == [20], ready
        s.start_worker()
        wait_until(lambda: r.llen(Keys(prefix).lane("s0", MODEL)) == 0, 30, 0.05, "the lane drained")
        wait_until(lambda: int(r.get(Keys(prefix).batched("s0", MODEL)) or 0) == 0, 30, 0.05, "batches done")
    finally:
        s.close()


def test_each_batched_job_fails_expires_and_is_withdrawn_alone(redis_server, prefix):
    s = Stack(redis_server.url, prefix, workers=0, extra_env=V2).start()
    r = redis.Redis.from_url(redis_server.url)
    try:
        before = _lpushes(r)
        bodies = [chat_body("first"), chat_body("good"), b'{"generate_response": {}}', chat_body("gone"),
                  chat_body("good2")]
        ids = asyncio.run(_submit_together(redis_server.url, prefix, bodies))
        expired = asyncio.run(_submit_together(redis_server.url, prefix, [chat_body("late")] * 3, deadline_s=0.01))
        assert _lpushes(r) - before == 4  # two batches (and the first job of each call alone)

        async def withdraw() -> bool:
            client = redis.asyncio.Redis.from_url(redis_server.url)
            try:
                return await JobQueue(client, Keys(prefix)).cancel(ids[3], MODEL)
            finally:
                await client.aclose()

        assert asyncio.run(withdraw())
        time.sleep(0.05)  # past the deadlines
        s.start_worker()
        states = [wait_until(lambda i=i: (b := job_state(s, i))["status"] != "pending" and b, 30, 0.05, "answered")
                  for i in (ids[0], ids[1], ids[2], ids[4], *expired)]
        assert [st.get("http_status") for st in states] == [200, 200, 400, 200, 504, 504, 504], states
        assert get_json(f"{s.url}/v1/jobs/{ids[3]}")[0] == 404
    finally:
        s.close()


def test_a_batch_whose_worker_died_is_retried_split(redis_server, prefix):
    env = {**V2, **FAST_RECOVERY}
    s = Stack(redis_server.url, prefix, workers=0, extra_env=env).start()
    r = redis.Redis.from_url(redis_server.url)
    lane = Keys(prefix).lane("s0", MODEL)
    try:
        ids = asyncio.run(_submit_together(redis_server.url, prefix, [chat_body(f"k{i}") for i in range(6)]))
        assert r.llen(lane) == 2
        doomed = s.start_worker(DERENDER_DEBUG_JOB_DELAY_S="30")
        wait_until(lambda: len(held(r, prefix)) == 2, 30, 0.05, "both values claimed")
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        # Recovered by a worker that cannot take them yet (all it does is recover).
        idle = s.start_worker(DERENDER_CONCURRENCY="1", DERENDER_DEBUG_JOB_DELAY_S="30")
        values = wait_until(lambda: r.llen(lane) == 5 and r.lrange(lane, 0, -1), 30, 0.05, "recovered split")
        assert sorted(split_attempt(v)[0] for v in values) == [2] * 5
        assert not any(split_attempt(v)[1].startswith(b"*") for v in values)
        stop(idle, signal.SIGKILL)
        s.start_worker()
        for job_id in ids:
            wait_until(lambda job_id=job_id: job_state(s, job_id)["status"] == "done", 30, 0.1, "answered")
    finally:
        s.close()


def test_a_claim_whose_reply_was_lost_is_run_not_deleted(prefix):
    """Redis moves a job into a slot's active list, then dies before the
    BLMOVE's reply leaves (CLIENT KILL and SHUTDOWN in the pipeline that
    pushes the job, so the reply is still in Redis's buffer, and the worker
    cannot read the list back until Redis is up again). The slot must read
    its list before it claims again: a second job moved in beside the first
    was deleted with it by the finish (the soak lost 13 jobs across a Redis
    restart that way)."""
    server = RedisProcess(appendonly=True).start()
    s = Stack(server.url, prefix, workers=1, extra_env={**V2, "DERENDER_CONCURRENCY": "1"}).start()
    r = redis.Redis.from_url(server.url)
    lane = Keys(prefix).lane("s0", MODEL)
    try:
        def blocked_claims() -> list[str]:  # the light and the heavy lane's loops
            claims = [c["id"] for c in r.client_list() if c["cmd"] == "blmove"]
            return claims if len(claims) == 2 else []

        claimers = wait_until(blocked_claims, 30, 0.05, "the worker blocked in BLMOVE on both lanes")
        first = f"s0.lost-reply-{prefix}"
        envelope = JobEnvelope(v=2, id=first, endpoint="chat", model=MODEL, enqueued_ms=now_ms())
        r.set(Keys(prefix).job(first), b"P" + pack(envelope, b""), px=600_000)
        with contextlib.suppress(redis.ConnectionError), r.pipeline(transaction=False) as pipe:
            pipe.lpush(lane, pack(envelope, chat_body("lost reply")))
            for claimer in claimers:
                pipe.client_kill_filter(_id=claimer)
            pipe.execute_command("SHUTDOWN")
            pipe.execute()
        server.proc.wait(10)
        time.sleep(1.0)  # the worker's read-back fails meanwhile: Redis is down
        server.start()
        wait_until(lambda: r.ping(), 10, 0.1, "Redis back")
        second = submit(s, chat_body("second"))
        for job_id in (first, second):
            done = wait_until(lambda job_id=job_id: (b := job_state(s, job_id))["status"] == "done" and b, 30, 0.1,
                              f"{job_id} answered")
            assert done["http_status"] == 200
    finally:
        s.close()
        server.close()


def test_with_replicas_a_batch_announces_only_the_results_it_wrote(redis_server, prefix):
    """DERENDER_MIN_REPLICAS: a batch's notifications follow the WAIT, and only
    for the jobs whose results the script wrote (not one withdrawn meanwhile)."""
    with RedisProcess(extra=("--replicaof", "127.0.0.1", str(redis_server.port))) as replica:
        wait_until(lambda: role(replica.port)[3] == "connected", 30, 0.05, "the replica in sync")
        assert asyncio.run(_announced_by_a_batch(redis_server.url, prefix)) == ["s0.kept"]


async def _announced_by_a_batch(url: str, prefix: str) -> list[str]:
    client = redis.asyncio.Redis.from_url(url)
    keys = Keys(prefix)
    runtime = JobRuntime(derenderer=None, cpu=None, redis=client, keys=keys, worker_id="w",
                         result_ttl_ms=60_000, durability=Durability.of(1, 1.0))
    envelopes = [JobEnvelope(v=2, id=job_id, endpoint="chat", model=MODEL, enqueued_ms=now_ms(), reply_to="r")
                 for job_id in ("s0.kept", "s0.withdrawn")]
    active = keys.active("s0", "w", MODEL, 0)
    await client.set(keys.job("s0.kept"), b"P", px=60_000)  # the other one's key is gone: withdrawn
    await client.rpush(active, b"the batch")
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    await pubsub.subscribe(keys.done("r"))
    try:
        values = [pack(ResultEnvelope(v=1, id=e.id, status=200, finished_ms=now_ms()), b"{}") for e in envelopes]
        await runtime._finish_batch(envelopes, values, active, len(envelopes) - 1)
        await client.publish(keys.done("r"), b"end")  # after every notification the batch sent
        announced = []
        async for message in pubsub.listen():
            if message["data"] == b"end":
                return announced
            announced += [job_id for job_id, _ in parse_notifications(message["data"])]
    finally:
        await pubsub.aclose()
        await client.aclose()
    return announced


def test_a_lane_that_cannot_list_its_claims_yet_retries_instead_of_ending_the_worker(redis_server, prefix):
    """Listing a worker's active lists for recovery is retried like a claim:
    here its SADD is refused (NOPERM) until the ACL allows it, and the worker
    lives on and then serves. Before, the error ended the job loop and the
    worker exited (a cluster master killed during start-up did the same)."""
    r = redis.Redis.from_url(redis_server.url)
    r.execute_command("ACL", "SETUSER", "w", "on", ">pw", "~*", "&*", "+@all", "-sadd")
    s = Stack(redis_server.url, prefix, workers=0).start()
    try:
        worker = s.start_worker(DERENDER_REDIS_URL=redis_server.url.replace("redis://", "redis://w:pw@"))
        job = submit(s, chat_body("later"))
        wait_until(lambda: any(e["username"] == "w" and e["object"] == "sadd" for e in r.acl_log()),
                   30, 0.05, "the SADD refused (Redis's ACL LOG)")
        assert worker.poll() is None
        r.execute_command("ACL", "SETUSER", "w", "+sadd")
        wait_until(lambda: job_state(s, job)["status"] == "done", 30, 0.1, "answered once it could list")
        assert worker.poll() is None
    finally:
        s.close()
        r.execute_command("ACL", "DELUSER", "w")


async def test_after_an_outage_recovery_takes_no_live_workers_claims_for_a_death_window(redis_server, prefix):
    """While Redis is down nobody can beat, so every heartbeat may have lapsed
    when it is back. A cluster soak caught the race: a worker's recovery pass
    ran before the other had beaten again, took its claims, and jobs ran up to
    four times, the last past DERENDER_MAX_TRIES into a 500. Now a pass that
    could not reach Redis starts a death window in which passes re-list but
    take nobody's claim; after it, a lapsed worker's claim is taken as before."""
    keys = Keys(prefix)
    r = redis.Redis.from_url(redis_server.url)
    lane, held_by_a = keys.lane("s0", MODEL), keys.active("s0", "A", MODEL, 0)
    r.rpush(held_by_a, b"value")
    r.sadd(keys.claims("s0"), held_by_a)
    r.zadd(keys.workers, {"A": now_ms() - 1})  # A's heartbeat lapsed during the outage
    down = async_client(f"redis://127.0.0.1:{free_port()}")  # the outage, as worker B met it
    b = SimpleNamespace(ctx={"runtime": SimpleNamespace(worker_id="B")}, keys=keys, model=MODEL, pool=down,
                        tags=("s0",), max_jobs=1)
    server = LaneServer(b)  # type: ignore[arg-type]  # the attributes LaneServer reads of its worker
    outage = Outage(window_s=600)
    await server.recover_pass(outage)
    assert not outage.over()
    up = async_client(redis_server.url)
    try:
        server.pool, server.scripts = up, Scripts(up)  # Redis is back
        await server.recover_pass(outage)
        assert r.lrange(held_by_a, 0, -1) == [b"value"] and r.llen(lane) == 0  # A may be alive: not taken
        assert r.sismember(keys.claims("s0"), keys.active("s0", "B", MODEL, 0))  # B's own claims re-listed
        await server.recover_pass(Outage(window_s=600))  # no outage seen: a lapsed heartbeat is a dead worker
        assert r.llen(held_by_a) == 0 and [split_attempt(v) for v in r.lrange(lane, 0, -1)] == [(2, b"value")]
    finally:
        await up.aclose()
        await down.aclose()
