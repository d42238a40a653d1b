"""Hostile producers at the worker's boundary (issue 12, items 1-3, the worker
side): whatever a producer writes into Redis, the worker's claim loops keep
taking jobs. Real redis-server, real worker processes. (Lane values that are
not jobs: tests/integration/test_queue_integration.py and tests/wire/test_wire_v2.py; wire
format v1's queue, wake list and job keys are gone since 0.2.0.)"""

from __future__ import annotations

import asyncio

import pytest
import redis

from derender_queue.wire.client import DerenderClient
from derender_queue.wire.keys import Keys
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
    s = Stack(redis_server.url, prefix, workers=1).start()
    yield s
    s.close()


def test_a_lane_key_of_the_wrong_type_is_survived_and_served_again_once_a_list(stack, redis_server, prefix):
    """Someone SETs the lane to a string: every claim fails (WRONGTYPE) and
    is retried; the worker stays alive and healthy, and serves the lane
    again once it is a list again."""
    r, keys = redis.Redis.from_url(redis_server.url), Keys(prefix)
    assert derender_one(redis_server.url, prefix, "before")["id"] == "before"
    r.set(keys.lane("s0", MODEL), "not a list")
    wait_until(lambda: r.get(keys.lane("s0", MODEL)) == b"not a list", 5, what="the lane retyped")
    assert health(stack) == 200
    assert get_json(stack.url + "/ready")[1]["workers"] == 1
    r.delete(keys.lane("s0", MODEL))
    assert derender_one(redis_server.url, prefix, "repaired")["id"] == "repaired"
