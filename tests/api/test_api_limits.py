"""What the API holds and refuses, with real processes and a real Redis:
backpressure on the queue's real depth, background tasks that survive bad
data, the in-flight byte budget (total and per API key) and the idle read
timeout (issue 12, items 9, 10, 11)."""

from __future__ import annotations

import json
import socket

import redis

from derender_queue.wire.keys import Keys, now_ms
from tests.helpers.keyed_stack import ALICE, BOB, KEYS, start_keyed
from tests.helpers.stack import Stack, get_json, metric, post, wait_until

CHAT = "/v1/chat/completions/derender"


def chat_body(tag: str, pad: int = 0) -> bytes:
    body = {"model": "deepseek-v4", "generate_response": {"request_id": tag, "choices": [
        {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}]}}
    if pad:
        body["pad"] = "x" * pad
    return json.dumps(body).encode()


def open_upload(port: int, size: int, headers: dict[str, str] | None = None, path: str = "/v1/jobs") -> socket.socket:
    """A request whose body is announced but only begun: the API holds it."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n{extra}"
                 f"content-length: {size}\r\n\r\n".encode() + b'{"model": "deepseek-v4", "pad": "')
    return sock


def post_keep_alive(stack: Stack, path: str, body: bytes,
                    headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
    """POST on a keep-alive connection. (urllib asks for `Connection: close`,
    so a server answering before reading the body closes the connection and
    the client, still sending, may see EPIPE instead of the answer.)"""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", stack.api_port, timeout=30)
    try:
        conn.request("POST", path, body, {"content-type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return response.status, response.read(), {k.lower(): v for k, v in response.getheaders()}
    finally:
        conn.close()


def in_flight(stack: Stack) -> float:
    """Requests being served, besides the /metrics request that reads it."""
    return metric(stack.url + "/metrics", "derender_api_requests_in_flight") - 1


def _keyed_in_flight(stack: Stack) -> float:
    import urllib.request

    req = urllib.request.Request(stack.url + "/metrics", headers=ALICE)
    with urllib.request.urlopen(req, timeout=10) as r:
        lines = r.read().decode().splitlines()
    return next(float(x.split()[1]) for x in lines if x.startswith("derender_api_requests_in_flight ")) - 1


# ---------------------------------------------------------------- item 9: real depth


def test_backpressure_admits_on_the_real_depth_not_on_finished_jobs(redis_server, prefix):
    """80 sequential requests that each finished, with a depth limit of 5 and
    no queue refresh during the run (30 s heartbeat): all answered."""
    s = Stack(redis_server.url, prefix, workers=1,
              extra_env={"DERENDER_MAX_QUEUE_DEPTH": "5", "DERENDER_HEARTBEAT_S": "30"}).start()
    try:
        codes = [post(s.url + CHAT, chat_body(f"seq{i}"))[0] for i in range(80)]
        assert codes == [200] * 80, codes
        # ... and a really full queue is still refused: jobs pile up with the worker gone.
        s.close()
        s.procs.clear()
        s.start_api()
        wait_until(lambda: get_json(s.url + "/health")[0] == 200, 30, what="API up")
        codes = [post(s.url + "/v1/jobs", chat_body(f"full{i}"))[0] for i in range(8)]
        assert codes[:5] == [202] * 5 and set(codes[5:]) == {429}, codes
    finally:
        s.close()


# ---------------------------------------------------------------- item 10: background tasks survive


def test_an_undecodable_heartbeat_is_skipped_and_the_watcher_lives_on(redis_server, prefix):
    s = Stack(redis_server.url, prefix, workers=0).start()
    try:
        r = redis.Redis.from_url(redis_server.url)
        keys = Keys(prefix)
        # A worker of another version: its heartbeat is not ours to decode.
        for bad, value in (("v9", b'{"id": 9, "models": ["deepseek-v4"]}'), ("garbage", b"\xff not json")):
            r.zadd(keys.workers, {bad: now_ms() + 600_000})
            r.set(keys.worker(bad), value, px=600_000)
        # One watcher pass with the bad heartbeats present (it exports the depth first) ...
        post(s.url + "/v1/jobs", chat_body("w0"))
        wait_until(lambda: metric(s.url + "/metrics", "derender_queue_depth", model="deepseek-v4") == 1, 30,
                   what="queue depth 1 exported")
        # ... and the watcher still refreshes after it: the depth follows the queue.
        for i in range(1, 3):
            post(s.url + "/v1/jobs", chat_body(f"w{i}"))
        wait_until(lambda: metric(s.url + "/metrics", "derender_queue_depth", model="deepseek-v4") == 3, 30,
                   what="queue depth 3 exported")
        assert metric(s.url + "/metrics", "derender_api_bad_heartbeats_total") >= 2
        status, ready = get_json(s.url + "/ready")
        assert (status, ready["workers"]) == (200, 0)
        assert get_json(s.url + "/status.json")[0] == 200
        assert get_json(s.url + "/v1/models")[0] == 200
    finally:
        s.close()


# ---------------------------------------------------------------- item 11: bytes in flight, idle reads


def test_bytes_in_flight_over_the_budget_are_503_with_retry_after(redis_server, prefix):
    s = Stack(redis_server.url, prefix, workers=0, extra_env={"DERENDER_MAX_INFLIGHT_BYTES": str(2**20)}).start()
    try:
        held = open_upload(s.api_port, 700_000)
        wait_until(lambda: in_flight(s) >= 1, 30, what="the first upload held")
        status, out, headers = post_keep_alive(s, "/v1/jobs", chat_body("second", pad=700_000))
        assert status == 503 and headers.get("retry-after") == "1", (status, out[:300])
        assert json.loads(out)["error"]["code"] == 503
        assert metric(s.url + "/metrics", "derender_api_rejected_total", reason="inflight_bytes") >= 1
        held.close()
        wait_until(lambda: metric(s.url + "/metrics", "derender_api_inflight_bytes") == 0, 30,
                   what="the held bytes released")
        assert post(s.url + "/v1/jobs", chat_body("third", pad=700_000))[0] == 202
        # A request larger than the whole budget still runs when it is alone.
        assert post(s.url + "/v1/jobs", chat_body("alone", pad=1_500_000))[0] == 202
    finally:
        s.close()


def test_per_api_key_in_flight_quota(redis_server, prefix):
    s = start_keyed(Stack(redis_server.url, prefix, workers=0, extra_env={
        "DERENDER_API_KEYS": KEYS, "DERENDER_MAX_INFLIGHT_BYTES_PER_KEY": str(2**20)}))
    try:
        held = open_upload(s.api_port, 700_000, ALICE)
        wait_until(lambda: _keyed_in_flight(s) >= 1, 30, what="alice's upload held")
        status, out, headers = post_keep_alive(s, "/v1/jobs", chat_body("a2", pad=700_000), ALICE)
        assert status == 503 and headers.get("retry-after") == "1", (status, out[:300])
        assert post(s.url + "/v1/jobs", chat_body("b1", pad=700_000), BOB)[0] == 202
        held.close()
    finally:
        s.close()


def test_a_stalled_upload_is_408_after_the_idle_timeout_and_the_connection_closed(redis_server, prefix):
    s = Stack(redis_server.url, prefix, workers=0, extra_env={"DERENDER_BODY_IDLE_TIMEOUT_S": "1"}).start()
    try:
        sock = open_upload(s.api_port, 10_000, path=CHAT)
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = sock.recv(65536)  # the socket's own 30 s timeout is the test's deadline
            assert chunk, reply
            reply += chunk
        assert reply.startswith(b"HTTP/1.1 408"), reply
        assert b"connection: close" in reply.lower()
        while chunk:
            chunk = sock.recv(65536)  # the server closes it
        sock.close()
        assert metric(s.url + "/metrics", "derender_api_requests_total", route="chat", status="408") == 1
    finally:
        s.close()
