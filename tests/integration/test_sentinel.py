"""Redis Sentinel (docs/sentinel.md): Sentinel URLs for every process,
clients that follow a failover, ROLE in /ready. Real redis-server processes
(tests/helpers/sentinel_process.py); DERENDER_MIN_REPLICAS is tests/integration/test_durability.py,
the 1,000-job failover run tests/integration/test_failover.py."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
import redis
from redis.asyncio import Redis

from derender_queue.wire.client import DerenderClient
from derender_queue.wire.connection import async_client, copy_pool, sibling_client, sync_client
from derender_queue.wire.redis_url import parse_sentinel_url
from tests.helpers.sentinel_process import SentinelGroup, role, wait_for
from tests.helpers.stack import Stack, get_json, post, wait_until

CHAT_PATH = "/v1/chat/completions/derender"
CHAT = {"generate_response": {"request_id": "r1", "choices": [
    {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}]}}
needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")


# ------------------------------------------------------------------ URLs


def test_sentinel_url_forms():
    url = parse_sentinel_url("redis+sentinel://app:s%40cret@10.0.0.1:26379,[::1]:26380,sentinel-c/derender/2"
                             "?sentinel_password=pw&socket_timeout=1.5")
    assert url.sentinels == (("10.0.0.1", 26379), ("::1", 26380), ("sentinel-c", 26379))
    assert url.service == "derender"
    assert url.node == {"db": 2, "username": "app", "password": "s@cret", "socket_timeout": 1.5}
    assert url.sentinel == {"password": "pw"}
    tls = parse_sentinel_url("rediss+sentinel://:pw@s1:26379/m?ssl_ca_certs=/ca.pem&sentinel_username=mon")
    assert tls.node == {"db": 0, "password": "pw", "ssl": True, "ssl_ca_certs": "/ca.pem"}
    assert tls.sentinel == {"username": "mon", "ssl": True, "ssl_ca_certs": "/ca.pem"}


@pytest.mark.parametrize("url, problem", [
    ("redis+sentinel:///derender/0", "at least one sentinel"),
    ("redis+sentinel://s1:26379", "path is /MASTER"),
    ("redis+sentinel://s1:26379/m/0/x", "path is /MASTER"),
    ("redis+sentinel://s1:port/m", "not a number"),
    ("redis+sentinel://s1:26379/m/zero", "not a number"),
    ("redis+sentinel://s1/m?socket_timeout=soon", "socket_timeout"),
])
def test_bad_sentinel_urls_say_what_is_wrong(url, problem):
    with pytest.raises(ValueError, match=problem):
        parse_sentinel_url(url)


def test_plain_urls_are_redis_py_own():
    client = async_client("redis://127.0.0.1:1/3", socket_timeout=2.0)
    assert type(client.connection_pool).__name__ == "ConnectionPool"
    assert client.connection_pool.connection_kwargs["db"] == 3


def test_blocking_copy_of_a_tls_pool_keeps_tls():
    """The worker's BRPOP client is a copy of its pool; the copy used to drop
    the connection class, so a rediss:// worker would BRPOP in plain text."""
    pool = async_client("rediss://127.0.0.1:6380/0").connection_pool
    copy = copy_pool(pool, max_connections=1)
    assert copy.connection_class is pool.connection_class
    assert copy.connection_class.__name__ == "SSLConnection" and copy.max_connections == 1


# ------------------------------------------------------------------ a Sentinel group


@pytest.fixture(scope="module")
def group():
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    with SentinelGroup(replicas=1) as g:
        yield g


def test_api_workers_client_and_batch_serve_through_a_sentinel_url(group, prefix, tmp_path):
    """Failed before: "Redis URL must specify one of the following schemes"."""
    from derender.batch import run_batch
    from derender_queue.settings import Settings

    s = Stack(group.url, prefix, workers=1).start()
    try:
        status, out, _ = post(s.url + CHAT_PATH, json.dumps(CHAT).encode())
        assert status == 200 and json.loads(out)["choices"][0]["message"]["content"] == "Hello, world!"
        assert get_json(s.url + "/ready")[1]["redis"] == "ok"

        async def direct() -> str:
            async with DerenderClient(group.url, key_prefix=prefix) as client:
                return (await client.derender_chat(CHAT))["choices"][0]["message"]["content"]

        assert asyncio.run(direct()) == "Hello, world!"
        lines = tmp_path / "in.jsonl"
        lines.write_text(json.dumps(CHAT) + "\n" + json.dumps(CHAT) + "\n")
        settings = Settings(redis_url=group.url, key_prefix=prefix)
        assert run_batch(settings, lines, tmp_path / "out.jsonl", processes=1) == 0
        assert [json.loads(line)["choices"][0]["message"]["content"]
                for line in (tmp_path / "out.jsonl").read_text().splitlines()] == ["Hello, world!"] * 2
    finally:
        s.close()


def test_worker_blocking_client_of_a_sentinel_pool(group):
    """Failed before: SentinelConnectionPool.__init__() missing 'service_name' and 'sentinel_manager'."""
    from worker.wakers import blocking_client

    async def main() -> list[bytes] | None:
        pool = async_client(group.url)
        waker = blocking_client(pool)
        try:
            await pool.rpush("sentinel-test:wake", b"job-1")
            return await waker.brpop(["sentinel-test:wake"], timeout=1)
        finally:
            await waker.aclose()
            await pool.aclose()

    assert tuple(asyncio.run(main()) or ()) == (b"sentinel-test:wake", b"job-1")


def test_stream_secret_is_shared_through_a_sentinel_url(group):
    client = sync_client(group.url)
    try:
        client.set("sentinel-test:sync", "1")
        assert client.get("sentinel-test:sync") == b"1"
    finally:
        client.close()


def test_ready_is_503_on_a_replica(group, prefix):
    """Pointed straight at a node that is a replica (a master demoted under a
    plain redis:// URL), /ready used to say ready while every write failed."""
    replica = next(p for p in group.nodes if role(p)[0] == "slave")
    s = Stack(f"redis://127.0.0.1:{replica}/0", prefix, workers=0)
    s.start_api()
    try:
        status, body = wait_until(lambda: (r := get_json(s.url + "/ready"))[0] != 0 and r, 60, 0.2, "API up")
        assert status == 503 and body == {"ready": False, "redis": "not a master (slave)"}
    finally:
        s.close()


def test_clients_follow_a_failover(group):
    """Requests, the waiter's pub/sub and the worker's BRPOP all reach the new
    master after SENTINEL FAILOVER, without a new client."""
    from worker.wakers import blocking_client

    async def main() -> None:
        requests = async_client(group.url, socket_timeout=2.0)
        listener = sibling_client(requests, socket_timeout=None)
        waker = blocking_client(requests)
        pubsub = listener.pubsub(ignore_subscribe_messages=True)
        await pubsub.subscribe("sentinel-test:done")
        old = group.master_port()
        await asyncio.to_thread(group.failover)
        new = await asyncio.to_thread(wait_for, lambda: (p := group.master_port()) != old and p, 30, "switch")

        async def written_to_new_master() -> bool:
            try:
                await requests.set("sentinel-test:after", "1")
            except redis.RedisError:
                return False
            return redis.Redis(port=new).get("sentinel-test:after") == b"1"

        await until(written_to_new_master, "requests on the new master")
        await until(lambda: waker_pops(waker, new), "BRPOP on the new master")

        async def heard() -> bool:  # a publish on the new master reaches the (re)subscribed waiter
            redis.Redis(port=new).publish("sentinel-test:done", "job")
            try:
                message = await pubsub.get_message(timeout=0.5)
            except redis.RedisError:
                await pubsub.subscribe("sentinel-test:done")  # what the waiter's loop does
                return False
            return message is not None and message["data"] == b"job"

        await until(heard, "the pub/sub subscription on the new master")
        await pubsub.aclose()
        for client in (waker, listener, requests):
            await client.aclose()

    asyncio.run(main())


def test_result_waiter_resubscribes_on_the_new_master(group):
    """wire/waiter.py's subscription moves to the new master: a notification
    published there, carrying its result (no result key, so the waiter's
    fallback read cannot be what delivers it), reaches the waiting task."""
    from derender_queue.wire.envelope import VERSION, ResultEnvelope, notification, pack
    from derender_queue.wire.keys import Keys
    from derender_queue.wire.queue import JobQueue
    from derender_queue.wire.waiter import ResultWaiter

    wait_for(lambda: group.healed(group.master_port()), 60, "the group healed from the last failover")

    async def main() -> None:
        requests = async_client(group.url, socket_timeout=2.0)
        keys = Keys("waiter-test")
        waiter = ResultWaiter(sibling_client(requests, socket_timeout=None), keys)
        queue = JobQueue(requests, keys)
        await waiter.start()
        old = group.master_port()
        await asyncio.to_thread(group.failover)
        new = await asyncio.to_thread(wait_for, lambda: (p := group.master_port()) != old and p, 30, "switch")
        value = pack(ResultEnvelope(v=VERSION, id="j", status=200, finished_ms=1), b"{}")

        async def delivered() -> bool:
            waiter.expect("j")
            redis.Redis(port=new).publish(keys.done(waiter.reply_to), notification("j", value))
            return await waiter.wait(queue, "j", 0.5) is not None

        await until(delivered, "a notification on the new master reaching the waiter")
        await waiter.close()
        await requests.aclose()

    asyncio.run(main())


async def waker_pops(waker: Redis, master: int) -> bool:
    redis.Redis(port=master).rpush("sentinel-test:wake2", "x")
    try:
        return await waker.brpop(["sentinel-test:wake2"], timeout=0.5) is not None
    except redis.RedisError:
        return False


async def until(check, what: str, timeout: float = 30) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if await check():
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(what)


@needs_redis
def test_a_master_turned_replica_under_a_client_is_left_not_read():
    """READONLY on a write becomes a reconnect (redis-py), and the reconnect's
    ROLE check refuses the node while the sentinels still name it, so neither
    writes nor reads go to a replica. The sentinels' own timers are left at
    their defaults here, so they do not undo the demotion during the test."""
    with SentinelGroup(replicas=1, fast_timers=False) as g:
        master = g.master_port()
        replica = next(p for p in g.nodes if p != master)

        async def main() -> None:
            client = async_client(g.url, socket_timeout=2.0)
            await client.set("k", "before")
            redis.Redis(port=replica).execute_command("REPLICAOF", "NO", "ONE")
            redis.Redis(port=master).execute_command("REPLICAOF", "127.0.0.1", str(replica))
            with pytest.raises(redis.ConnectionError, match="The previous master is now a slave"):
                await client.set("k", "after")
            with pytest.raises(redis.ConnectionError, match="not a master"):
                await client.get("k")
            redis.Redis(port=master).execute_command("REPLICAOF", "NO", "ONE")
            redis.Redis(port=replica).execute_command("REPLICAOF", "127.0.0.1", str(master))
            await until(lambda: can_set(client), "the master back")
            await client.aclose()

        asyncio.run(main())


async def can_set(client: Redis) -> bool:
    try:
        return bool(await client.set("k", "again"))
    except redis.RedisError:
        return False
