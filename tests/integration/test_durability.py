"""DERENDER_MIN_REPLICAS (docs/sentinel.md): a job is acknowledged,
and a result announced, only once that many replicas have it (WAIT); too few
in time is a 503 + Retry-After, and a retry with the same Idempotency-Key gets
that one job. Real redis-server processes, a replica attached when wanted."""

from __future__ import annotations

import asyncio
import json

import pytest
import redis
from redis.asyncio import Redis

from derender_queue.wire.client import DerenderClient
from derender_queue.wire.keys import Keys
from derender_queue.wire.lanes import replicated
from derender_queue.wire.replication import Durability, NotReplicated, node_role
from tests.helpers.redis_process import RedisProcess
from tests.helpers.sentinel_process import role, wait_for
from tests.helpers.stack import Stack, get_json, post, wait_until

CHAT_PATH = "/v1/chat/completions/derender"
CHAT = {"generate_response": {"request_id": "r1", "choices": [
    {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}]}}


@pytest.fixture
def master():
    """A Redis of this test's own: tests here attach replicas to it."""
    with RedisProcess() as server:
        yield server


def replica_of(server: RedisProcess) -> RedisProcess:
    """A replica of `server`, started and in sync (use as a context manager):
    its link is up and the master has its acknowledgement of everything
    written so far (a WAIT right after "connected" could still time out on
    a busy machine: test_derender_client_reads_min_replicas_as_the_api_does did)."""
    replica = RedisProcess(extra=("--replicaof", "127.0.0.1", str(server.port))).start()
    wait_for(lambda: role(replica.port)[3] == "connected", 20, "replica in sync")
    offset = int(role(server.port)[1])
    wait_for(lambda: any(int(r[2]) >= offset for r in role(server.port)[2]), 20, "replica's acknowledgement")
    return replica


def test_a_write_waits_for_replicas_and_says_how_many(master):
    async def main() -> None:
        r = Redis.from_url(master.url)
        with pytest.raises(NotReplicated, match="0 of 1 Redis replicas acknowledged the write within 50 ms"):
            await replicated(r, Durability(1, 50), [("SET", "durable", "1")])
        assert await r.get("durable") == b"1"  # written on the master, just not acknowledged
        assert await replicated(r, Durability(0, 50), [("SET", "durable", "2")]) == [True]  # no WAIT
        assert await node_role(r) == ("master", 0)
        await r.aclose()

    asyncio.run(main())


def test_replicated_submit_and_result(master, prefix):
    """With one replica attached, DERENDER_MIN_REPLICAS=1 serves as before."""
    with replica_of(master):
        s = Stack(master.url, prefix, workers=1, extra_env={"DERENDER_MIN_REPLICAS": "1"}).start()
        try:
            status, out, _ = post(s.url + CHAT_PATH, json.dumps(CHAT).encode())
            assert status == 200, out
            assert get_json(s.url + "/ready")[0] == 200
        finally:
            s.close()


def test_too_few_replicas_refuse_with_503_and_withdraw_the_job(master, prefix):
    env = {"DERENDER_MIN_REPLICAS": "1", "DERENDER_REPLICA_TIMEOUT_S": "0.2"}
    s = Stack(master.url, prefix, workers=0, extra_env=env)
    s.start_api()
    r = redis.Redis.from_url(master.url)
    try:
        wait_until(lambda: get_json(s.url + "/health")[0] == 200, 60, 0.2, "API up")
        status, body = get_json(s.url + "/ready")
        assert status == 503 and body["redis"] == "0 of 1 replicas connected"
        for path in (CHAT_PATH, "/v1/jobs?endpoint=chat"):
            status, out, headers = post(s.url + path, json.dumps(CHAT).encode())
            assert status == 503 and headers["Retry-After"] == "1", out
            assert "NotReplicated" in json.loads(out)["error"]["message"]
        assert not list(r.scan_iter(f"{prefix}:*:job:*")), "withdrawn: no job key (a worker answers none)"
    finally:
        s.close()


def test_retry_with_the_same_idempotency_key_gets_one_job_once_replicated(master, prefix):
    """Refused for want of a replica, the job was withdrawn; the retry with the
    same key, once a replica is there, enqueues that job id: one job, run once.
    The timeout is what the refusal waits, and all a present replica has to
    acknowledge in: 0.2 s was too short for it on a loaded machine (a 503 where
    202 was due, once in a full run under load)."""
    env = {"DERENDER_MIN_REPLICAS": "1", "DERENDER_REPLICA_TIMEOUT_S": "3"}
    s = Stack(master.url, prefix, workers=1, extra_env=env, log_dir=None)
    s.start_api()
    try:
        wait_until(lambda: get_json(s.url + "/health")[0] == 200, 60, 0.2, "API up")
        key = {"Idempotency-Key": "retry-me"}
        status, _, _ = post(s.url + "/v1/jobs?endpoint=chat", json.dumps(CHAT).encode(), key)
        assert status == 503
        with replica_of(master):
            status, out, _ = post(s.url + "/v1/jobs?endpoint=chat", json.dumps(CHAT).encode(), key)
            assert status == 202, out
            job_id = json.loads(out)["id"]
            status, again, _ = post(s.url + "/v1/jobs?endpoint=chat", json.dumps(CHAT).encode(), key)
            assert status == 202 and json.loads(again)["id"] == job_id
            s.start_worker()
            done = wait_until(lambda: (b := get_json(f"{s.url}/v1/jobs/{job_id}")[1])["status"] == "done" and b,
                              60, 0.1, "job done")
            assert done["result"]["choices"][0]["message"]["content"] == "Hello, world!"
            assert s.worker_metric("derender_worker_jobs_total") == 1
    finally:
        s.close()


def test_direct_producers_can_require_replicas_too(master):
    from derender_queue.wire.client import DerenderClient

    async def main() -> None:
        async with DerenderClient(master.url, key_prefix="direct", durability=Durability(1, 50)) as client:
            with pytest.raises(NotReplicated):
                await client.submit("chat", CHAT)
            assert client.waiter._pending == {}  # nothing left waiting for a refused job

    asyncio.run(main())


def test_worker_announces_a_result_only_once_replicated(master, prefix, registry):
    """The result is written, but its notification waits until a replica has
    it: a waiter never wakes for a result that a failover could still lose."""
    from derender_queue.core import Derenderer
    from derender_queue.wire.envelope import JobEnvelope, pack
    from derender_queue.wire.keys import now_ms
    from derender_queue.wire.lanes import PENDING
    from worker.cpu_pool import CpuPool
    from worker.jobs import JobRuntime

    keys = Keys(prefix)
    listener = redis.Redis.from_url(master.url).pubsub(ignore_subscribe_messages=True)
    listener.subscribe(keys.done("me"))

    async def main() -> int:
        r = Redis.from_url(master.url)
        derenderer = Derenderer(registry)
        runtime = JobRuntime(derenderer=derenderer, cpu=CpuPool(derenderer, 0), redis=r, keys=keys,
                             worker_id="w", result_ttl_ms=60_000, durability=Durability(1, 100))
        envelope = JobEnvelope(v=2, id="s0.j1", endpoint="chat", model="deepseek-v4", enqueued_ms=now_ms(),
                               reply_to="me")
        body = json.dumps(CHAT).encode()
        active = keys.active("s0", "w", "deepseek-v4", 0)
        await r.set(keys.job("s0.j1"), PENDING + pack(envelope, b""))
        await r.lpush(active, pack(envelope, body))  # claimed: the finish's fence
        job = asyncio.create_task(runtime.run(envelope, body, attempt=1, active=active))
        await asyncio.to_thread(
            wait_for, lambda: redis.Redis.from_url(master.url).getrange(keys.job("s0.j1"), 0, 0) == b"{",
            30, "the result written")
        assert listener.get_message(timeout=0) is None  # no replica yet: not announced
        with replica_of(master):
            message = await asyncio.to_thread(wait_for, lambda: listener.get_message(timeout=0.2), 30,
                                              "the notification once replicated")
            assert message["data"].split(b"\n")[0] == b"s0.j1"
            status = await job
        await r.aclose()
        return status

    try:
        assert asyncio.run(main()) == 200
    finally:
        listener.close()


def _app(redis_url: str, prefix: str):
    from api.app import create_app
    from api.server import state_factory
    from derender_queue.settings import Settings

    settings = Settings(key_prefix=prefix, redis_url=redis_url)
    return create_app(state_factory(settings, Redis.from_url(redis_url), Redis.from_url(redis_url)))


def test_keyed_retry_after_a_failed_submit_enqueues_the_job(master, prefix, monkeypatch):
    """The key is bound before the job is written; when that write failed, the
    retry with the same key used to answer 202 for a job that did not exist
    (GET said `unknown` for ever)."""
    from starlette.testclient import TestClient

    from derender_queue.wire.queue import JobQueue

    # A keyed submit binds the key in the transaction that enqueues the job (submit_once).
    submit, failures = JobQueue.submit_once, [redis.ConnectionError("Redis went away mid-submit")]

    async def flaky(self, *args, **kwargs):
        if failures:
            raise failures.pop()
        return await submit(self, *args, **kwargs)

    monkeypatch.setattr(JobQueue, "submit_once", flaky)
    with TestClient(_app(master.url, prefix)) as client:
        key = {"Idempotency-Key": "k1"}
        assert client.post("/v1/jobs?endpoint=chat", json=CHAT, headers=key).status_code == 503
        retry = client.post("/v1/jobs?endpoint=chat", json=CHAT, headers=key)
        assert retry.status_code == 202
        job_id = retry.json()["id"]
        assert client.get(f"/v1/jobs/{job_id}").json()["status"] == "pending"
        again = client.post("/v1/jobs?endpoint=chat", json=CHAT, headers=key)
        assert again.status_code == 202 and again.json()["id"] == job_id
    r = redis.Redis.from_url(master.url)
    lane = r.lrange(Keys(prefix).lane("s0", "deepseek-v4"), 0, -1)
    assert [value for value in lane if job_id.encode() in value] == lane and len(lane) == 1  # one job


def test_a_read_that_finds_neither_result_nor_job_looks_once_more(prefix, monkeypatch):
    """GET /v1/jobs/{id} reads result and job in one atomic step; a read that
    finds neither (a demoted master answering, or the job finishing as a
    failover moves the clients) looks once more before answering `unknown`."""
    import fakeredis
    from starlette.testclient import TestClient

    from api.app import create_app
    from api.server import state_factory
    from derender_queue.settings import Settings
    from derender_queue.wire.envelope import VERSION, ResultEnvelope, pack
    from derender_queue.wire.queue import JobQueue, Lookup

    server = fakeredis.FakeServer()
    keys = Keys(prefix)
    lookup = JobQueue.lookup

    async def stale_then_finished(self, job_id):
        monkeypatch.setattr(JobQueue, "lookup", lookup)
        result = ResultEnvelope(v=VERSION, id=job_id, status=200, finished_ms=1)
        await self.redis.set(keys.job(job_id), pack(result, b'{"ok": true}'))
        return Lookup(None, False, None)  # what the stale node answered

    with TestClient(create_app(state_factory(Settings(key_prefix=prefix), fakeredis.FakeAsyncRedis(server=server),
                                             fakeredis.FakeAsyncRedis(server=server)))) as client:
        job_id = client.post("/v1/jobs?endpoint=chat", json=CHAT).json()["id"]
        monkeypatch.setattr(JobQueue, "lookup", stale_then_finished)
        answer = client.get(f"/v1/jobs/{job_id}")
        assert answer.status_code == 200 and answer.json()["result"] == {"ok": True}


def test_derender_client_reads_min_replicas_as_the_api_does(master, prefix, monkeypatch):
    """Issue 31 item 5: DerenderClient ignored DERENDER_MIN_REPLICAS, so a
    Python producer's submits were never followed by WAIT. WAIT's calls on
    the master say whether they are; an explicit `durability` still wins."""
    monkeypatch.setenv("DERENDER_MIN_REPLICAS", "1")
    monkeypatch.setenv("DERENDER_REPLICA_TIMEOUT_S", "0.2")
    r = redis.Redis.from_url(master.url)

    def waits() -> int:
        return int(r.info("commandstats").get("cmdstat_wait", {}).get("calls", 0))

    async def submit(**options) -> str:
        async with DerenderClient(master.url, key_prefix=prefix, **options) as client:
            return await client.submit("chat", CHAT)

    with pytest.raises(NotReplicated, match="0 of 1 Redis replicas"):  # no replica yet: refused
        asyncio.run(submit())
    assert waits() == 1
    with replica_of(master):
        assert asyncio.run(submit())
        assert waits() == 2
        assert asyncio.run(submit(durability=Durability()))  # the argument wins: the master's word
        assert waits() == 2
    r.close()
