"""The README's Redis ACL for producers: enough to enqueue and read results
through DerenderClient, nothing else."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis
from stack import Stack

from derender_queue.client import DerenderClient

PRODUCER_ACL = (
    "on >producer-secret-123 resetchannels &{p}:done:* "
    "~{p}:job:* ~{p}:queue:* ~{p}:wake:* ~{p}:result:* "
    "-@all +multi +exec +set +zadd +lpush +rpush +ltrim +get +del +subscribe +ping"
)


def test_readme_shows_this_acl():
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    rule = PRODUCER_ACL.format(p="derender").replace(">producer-secret-123", ">PASSWORD")
    assert f"ACL SETUSER producer {rule}" in readme


def test_a_producer_with_the_readme_acl_can_derender_and_nothing_more(redis_server, prefix):
    admin = redis.Redis.from_url(redis_server.url)
    admin.execute_command("ACL", "SETUSER", f"producer-{prefix}", *PRODUCER_ACL.format(p=prefix).split())
    url = redis_server.url.replace("redis://", f"redis://producer-{prefix}:producer-secret-123@")
    s = Stack(redis_server.url, prefix, workers=1).start()
    try:
        async def main():
            async with DerenderClient(url, key_prefix=prefix) as client:
                return await client.derender_chat({"generate_response": {"request_id": "acl", "choices": [
                    {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}]}})

        assert asyncio.run(main())["choices"][0]["message"]["content"] == "Hello, world!"
        limited = redis.Redis.from_url(url)
        for forbidden in (lambda: limited.get(f"{prefix}:worker:x"), lambda: limited.flushall(),
                          lambda: limited.get("other:key"), lambda: limited.zrem(f"{prefix}:queue:deepseek-v4", "x")):
            with pytest.raises(redis.exceptions.NoPermissionError):
                forbidden()
    finally:
        s.close()
        admin.execute_command("ACL", "DELUSER", f"producer-{prefix}")
