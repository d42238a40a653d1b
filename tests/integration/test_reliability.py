"""Faults with real processes and a real Redis: a long job on a live worker,
Redis and API restarts, backpressure, API keys (killed workers and poison jobs:
tests/wire/test_wire_v2.py)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import redis

from derender_queue.wire.client import DerenderClient
from derender_queue.wire.keys import Keys
from tests.helpers.redis_process import RedisProcess
from tests.helpers.stack import Stack, cli, get_json, post, stop, wait_until

CHAT_PATH = "/v1/chat/completions/derender"

pytestmark = pytest.mark.slow  # real processes (docs/development.md: test tiers)


def chat_body(tag: str) -> dict:
    return {"generate_response": {"request_id": tag, "choices": [
        {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}]}}


async def _derender_all(url: str, prefix: str, tags: list[str], timeout: float = 60) -> list[dict]:
    async with DerenderClient(url, key_prefix=prefix) as client:
        return await asyncio.gather(*(client.derender_chat(chat_body(t), timeout=timeout) for t in tags))


def _aof_rewritten(r: redis.Redis) -> bool:
    """The rewrite finished (and was fsynced): the queued jobs are on disk."""
    info = r.info("persistence")
    return (not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]
            and info["aof_last_bgrewrite_status"] == "ok")


def test_long_job_on_a_live_worker_is_never_started_twice(redis_server, prefix, tmp_path):
    """A job running four times the death window (three heartbeats) keeps its
    claim while its worker lives (a killed worker's: tests/wire/test_wire_v2.py)."""
    s = Stack(redis_server.url, prefix, workers=2, log_dir=str(tmp_path),
              extra_env={"DERENDER_HEARTBEAT_S": "0.33", "DERENDER_DEBUG_JOB_DELAY_S": "4"}).start()
    try:
        results = asyncio.run(_derender_all(redis_server.url, prefix, ["long"], timeout=30))
        assert results[0]["id"] == "long"
    finally:
        s.close()
    assert list(s.executions().values()) == [1]  # read after both workers exited (see above)


def test_redis_restart_503_then_recovery_and_queued_jobs_survive(prefix, tmp_path):
    server = RedisProcess(appendonly=True).start()
    s = Stack(server.url, prefix, workers=1).start()
    try:
        r = redis.Redis.from_url(server.url)
        stop(s.worker_procs[0])
        queued = [json.loads(post(s.url + "/v1/jobs?endpoint=chat", json.dumps(chat_body(f"q{i}")).encode())[1])["id"]
                  for i in range(5)]
        assert r.llen(Keys(prefix).lane("s0", "deepseek-v4")) == 5
        r.execute_command("BGREWRITEAOF")
        wait_until(lambda: _aof_rewritten(r), 30, 0.05, "the append-only file rewritten")
        server.stop()
        t = time.monotonic()
        status, out, headers = post(s.url + CHAT_PATH, json.dumps(chat_body("down")).encode(), timeout=10)
        assert status == 503 and headers.get("Retry-After") and time.monotonic() - t < 5
        assert json.loads(out)["error"]["code"] == 503
        assert get_json(s.url + "/ready")[0] == 503
        server.start()
        back = time.monotonic()
        # The API reconnects by itself within seconds (its own claim, timed
        # apart from starting a worker process, which a loaded host makes slow).
        wait_until(lambda: get_json(s.url + "/ready")[0] == 200, 10, 0.1, "the API reconnected")
        assert time.monotonic() - back <= 5
        s.start_worker()
        s.wait_ready(1)
        wait_until(lambda: post(s.url + CHAT_PATH, json.dumps(chat_body("up")).encode(), timeout=5)[0] == 200,
                   10, 0.1, "serving again")
        for job_id in queued:
            wait_until(lambda job_id=job_id: get_json(f"{s.url}/v1/jobs/{job_id}")[1]["status"] == "done",
                       10, 0.1, "queued job done")
    finally:
        s.close()
        server.close()


def test_results_survive_an_api_restart(redis_server, prefix):
    s = Stack(redis_server.url, prefix, workers=1).start()
    try:
        ids = [json.loads(post(s.url + "/v1/jobs?endpoint=chat", json.dumps(chat_body(f"a{i}")).encode())[1])["id"]
               for i in range(3)]
        stop(s.procs[0])
        s.start_api()
        s.wait_ready(1)
        for job_id in ids:
            body = wait_until(
                lambda job_id=job_id: (b := get_json(f"{s.url}/v1/jobs/{job_id}")[1])["status"] == "done" and b, 10)
            assert body["result"]["object"] == "chat.completion"
    finally:
        s.close()


def test_backpressure_refuses_with_retry_after(redis_server, prefix):
    s = Stack(redis_server.url, prefix, workers=0, extra_env={"DERENDER_MAX_QUEUE_DEPTH": "3"}).start()
    try:
        statuses = [post(s.url + "/v1/jobs", json.dumps(chat_body(f"b{i}")).encode()) for i in range(6)]
        codes = [st for st, _, _ in statuses]
        assert codes[:3] == [202, 202, 202] and set(codes[3:]) == {429}
        _, out, headers = statuses[-1]
        assert headers.get("Retry-After") == "1" and json.loads(out)["error"]["code"] == 429
    finally:
        s.close()


def test_api_keys_guard_every_route_but_health_and_scope_jobs(redis_server, prefix):
    keys = "alice:alice-0123456789abcdef,bob:bob-0123456789abcdefgh"
    s = Stack(redis_server.url, prefix, workers=1, extra_env={"DERENDER_API_KEYS": keys})
    s.procs.append(cli("api", env=s.env()))
    s.start_worker()
    try:
        wait_until(lambda: get_json(s.url + "/health")[0] == 200, 30)
        alice = {"authorization": "Bearer alice-0123456789abcdef"}
        bob = {"authorization": "Bearer bob-0123456789abcdefgh"}
        body = json.dumps(chat_body("s1")).encode()
        for headers in ({}, {"authorization": "Bearer nope"}, {"authorization": "Basic x"}):
            status, out, _ = post(s.url + CHAT_PATH, body, headers)
            assert status == 401 and json.loads(out)["error"]["message"] == "Unauthorized"
        import urllib.request

        req = urllib.request.Request(s.url + "/metrics")
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(req, timeout=5)
        wait_until(lambda: post(s.url + CHAT_PATH, body, alice)[0] == 200, 30)
        job_id = json.loads(post(s.url + "/v1/jobs", body, alice)[1])["id"]

        def fetch(headers):
            req = urllib.request.Request(f"{s.url}/v1/jobs/{job_id}", headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=5) as resp:
                    return json.loads(resp.read())
            except urllib.error.HTTPError as e:
                return json.loads(e.read())

        wait_until(lambda: fetch(alice)["status"] == "done", 10)
        assert fetch(bob)["status"] == "unknown"
    finally:
        s.close()


def test_oversized_body_is_413_before_it_is_read(redis_server, prefix):
    import socket

    s = Stack(redis_server.url, prefix, workers=0, extra_env={"DERENDER_MAX_BODY_BYTES": "4096"}).start()
    try:
        sock = socket.create_connection(("127.0.0.1", s.api_port), timeout=5)
        sock.sendall(b"POST /v1/chat/completions/derender HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                     b"content-length: 100000000\r\n\r\n{")
        reply = sock.recv(4096)
        assert reply.startswith(b"HTTP/1.1 413")
        sock.close()
        assert post(s.url + "/health", b"")[0] in (200, 405)
    finally:
        s.close()
