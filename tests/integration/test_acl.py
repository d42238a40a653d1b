"""docs/security.md's Redis ACL for producers, run as written (issue 12, item 3):
a producer can submit, wait, read and delete its result and withdraw a
queued job through DerenderClient, and nothing that could retype, read or
empty a lane, claim a job or forge a notification (nor touch what wire
format v1 used)."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path

import pytest
import redis

from derender_queue.wire.client import DerenderClient
from tests.helpers.redis_process import RedisProcess
from tests.helpers.stack import Stack, wait_until

SECURITY_PAGE = Path(__file__).resolve().parents[2] / "docs" / "security.md"
PREFIX = "derender"  # the page's rule names the default prefix
BODY = {"generate_response": {"request_id": "acl", "choices": [
    {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}]}}


def documented_acl() -> list[str]:
    """docs/security.md's `redis-cli ACL SETUSER producer ...` command, as a shell
    would split it (backslash-continued lines joined)."""
    lines = SECURITY_PAGE.read_text("utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if "ACL SETUSER producer " in line)
    command = []
    for line in lines[start:]:
        command.append(line.strip().removesuffix("\\"))
        if not line.rstrip().endswith("\\"):
            break
    argv = shlex.split(" ".join(command))
    if argv[0] == "redis-cli":
        argv = argv[1:]
    assert argv[:3] == ["ACL", "SETUSER", "producer"], argv
    return argv


def test_the_documented_rule_is_one_command_with_selectors():
    argv = documented_acl()
    assert ">PASSWORD" in argv and "-@all" in argv and sum(a.startswith("(") for a in argv) >= 4


@pytest.fixture(scope="module")
def acl_stack():
    """A private redis-server (the rule names the default prefix), the
    page's producer user, and a worker and API that use the default user."""
    try:
        server = RedisProcess().start()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    admin = redis.Redis.from_url(server.url)
    assert admin.execute_command(*documented_acl()) in (b"OK", "OK")
    s = Stack(server.url, PREFIX, workers=1).start()
    yield server, admin, server.url.replace("redis://", "redis://producer:PASSWORD@")
    s.close()
    server.close()


def test_a_producer_can_submit_wait_read_delete_and_withdraw(acl_stack):
    _, admin, url = acl_stack

    async def scenario() -> None:
        async with DerenderClient(url, key_prefix=PREFIX) as client:
            out = await client.derender_chat(BODY, timeout=30)
            assert out["choices"][0]["message"]["content"] == "Hello, world!"
            ids = [await client.submit("chat", BODY) for _ in range(8)]
            results = await asyncio.gather(*(client.wait(job_id, 30) for job_id in ids))  # submit, then GET + DEL
            assert [r.status for r in results] == [200] * 8
            together = await asyncio.gather(*(client.derender_chat(BODY, timeout=30) for _ in range(8)))  # batched
            assert {o["choices"][0]["message"]["content"] for o in together} == {"Hello, world!"}
            heavy = {"generate_response": {"request_id": "acl", "choices": [  # over 32 KiB: the heavy lane
                {"index": 0, "token_ids": [19923, 14, 2058, 3, 1] * 2000, "finish_reason": "stop"}]}}
            assert (await client.wait(await client.submit("chat", heavy), 30)).status == 200  # the heavy lane
            queued = await client.submit("chat", BODY, model="nobody-serves-this")
            assert await client.queue.cancel(queued, "nobody-serves-this")
            assert admin.exists(f"{PREFIX}:{{s0}}:job:{queued}") == 0
            await asyncio.to_thread(wait_until, lambda: not admin.keys(f"{PREFIX}:{{s0}}:job:*"), 10, 0.05,
                                    "the producer's results deleted")

    asyncio.run(scenario())


LANE, V2_JOB = f"{PREFIX}:{{s0}}:lane:deepseek-v4", f"{PREFIX}:{{s0}}:job:s0.x"
FORBIDDEN = {
    "retype a lane": ("SET", LANE, "x"),
    "delete a lane": ("DEL", LANE),
    "pop a lane": ("RPOP", LANE),
    "pop a heavy lane": ("RPOP", f"{PREFIX}:{{s0}}:heavy:deepseek-v4"),
    "read a lane": ("LRANGE", LANE, "0", "-1"),
    "claim from a lane": ("LMOVE", LANE, f"{PREFIX}:{{s0}}:active:w:deepseek-v4:0", "RIGHT", "LEFT"),
    "read a claim": ("LRANGE", f"{PREFIX}:{{s0}}:active:w:deepseek-v4:0", "0", "-1"),
    "unlist a claim": ("SREM", f"{PREFIX}:{{s0}}:claims", "x"),
    "read a v2 job while replacing it": ("SET", V2_JOB, "y", "GET"),
    "retype a v2 job": ("LPUSH", V2_JOB, "y"),
    "run a v2 script": ("EVALSHA", "0" * 40, "0"),
    # wire format v1's keys (removed in 0.2.0): no grant at all
    "retype a wake list": ("SET", f"{PREFIX}:wake:deepseek-v4", "x"),
    "delete a wake list": ("DEL", f"{PREFIX}:wake:deepseek-v4"),
    "pop wake tokens": ("RPOP", f"{PREFIX}:wake:deepseek-v4"),
    "read a wake list": ("LRANGE", f"{PREFIX}:wake:deepseek-v4", "0", "-1"),
    "retype a queue": ("SET", f"{PREFIX}:queue:deepseek-v4", "x"),
    "delete a queue": ("DEL", f"{PREFIX}:queue:deepseek-v4"),
    "empty a queue": ("ZREMRANGEBYRANK", f"{PREFIX}:queue:deepseek-v4", "0", "-1"),
    "pop a queue": ("ZPOPMIN", f"{PREFIX}:queue:deepseek-v4"),
    "list a queue": ("ZRANGE", f"{PREFIX}:queue:deepseek-v4", "0", "-1"),
    "write a result": ("SET", f"{PREFIX}:result:x", '{"v":1,"id":"x","status":200,"finished_ms":1,"owner":"o"}\n{}'),
    "append to a result": ("APPEND", f"{PREFIX}:result:x", "x"),
    "expire a result": ("PEXPIRE", f"{PREFIX}:result:x", "1"),
    "rename a job into a result": ("RENAME", f"{PREFIX}:job:x", f"{PREFIX}:result:x"),
    "copy a job into a result": ("COPY", f"{PREFIX}:job:x", f"{PREFIX}:result:x"),
    "read another job's body": ("GET", f"{PREFIX}:job:x"),
    "read a job body while replacing it": ("SET", f"{PREFIX}:job:x", "y", "GET"),
    "delete a job and a result at once": ("DEL", f"{PREFIX}:job:x", f"{PREFIX}:result:x"),
    "claim a job": ("SET", f"{PREFIX}:in-progress:x", "1"),
    "read the stream secret": ("GET", f"{PREFIX}:stream-secret"),
    "forge a heartbeat": ("SET", f"{PREFIX}:worker:x", "{}"),
    "forge a notification": ("PUBLISH", f"{PREFIX}:done:x", "x"),
    "listen to every notification": ("PSUBSCRIBE", f"{PREFIX}:done:*"),
    "another channel": ("SUBSCRIBE", "other"),
    "another key": ("GET", "other:key"),
    "scan keys": ("SCAN", "0"),
    "list keys": ("KEYS", "*"),
    "run a script": ("EVAL", "return 1", "0"),
    "flush": ("FLUSHALL",),
}


@pytest.mark.parametrize("what", list(FORBIDDEN))
def test_a_producer_cannot(acl_stack, what):
    _, _, url = acl_stack
    limited = redis.Redis.from_url(url)
    try:
        with pytest.raises(redis.exceptions.NoPermissionError):
            limited.execute_command(*FORBIDDEN[what])
    finally:
        limited.close()


def test_misuse_left_open_is_harmless(acl_stack):
    """What the rule cannot narrow (docs/security.md): DEL drops a job key
    (only by its unguessable id) and LPUSH puts anything on a lane (counted and
    dropped by the worker); the workers keep serving."""
    _, _, url = acl_stack
    limited = redis.Redis.from_url(url)
    try:
        limited.delete(f"{PREFIX}:{{s0}}:job:s0.not-a-real-id")
        limited.lpush(LANE, b"not a job")
    finally:
        limited.close()

    async def derender() -> dict:
        async with DerenderClient(url, key_prefix=PREFIX) as client:
            return await client.derender_chat(BODY, timeout=30)

    assert asyncio.run(derender())["id"] == "acl"
