"""The SSE route (`POST .../derender/sse`) on a real API, worker and Redis:
its framing (docs/streaming.md), what it refuses with a 400, and
what happens when Redis fails mid-stream or the client leaves."""

from __future__ import annotations

import json
import socket
import time

import pytest
import redis

from derender_queue.wire.keys import Keys
from tests.helpers.redis_process import RedisProcess
from tests.helpers.stack import Stack, post, wait_until

pytestmark = pytest.mark.slow  # real processes (docs/development.md: test tiers)
SSE = "/v1/chat/completions/derender/sse"
FIRST = {"request_id": "s", "choices": [{"index": 0, "token_ids": [19923, 14]}]}
LAST = {"request_id": "s", "choices": [{"index": 0, "token_ids": [2058, 3, 1], "finish_reason": "stop"}]}


def sse(*events: str) -> bytes:
    return "".join(event + "\n\n" for event in events).encode()


def data(obj: object) -> str:
    return "data: " + json.dumps(obj)


def events(body: bytes) -> list[str]:
    return [e.removeprefix("data: ") for e in body.decode().split("\n\n") if e]


def text_of(body: bytes) -> str:
    out = ""
    for event in events(body)[:-1]:
        for choice in json.loads(event)["choices"]:
            out += choice["delta"].get("content") or ""
    return out


@pytest.fixture(scope="module")
def stack(redis_server):
    s = Stack(redis_server.url, "sse", workers=1).start()
    yield s
    s.close()


def send(stack: Stack, body: bytes) -> tuple[int, bytes]:
    status, out, _ = post(stack.url + SSE, body, {"content-type": "text/event-stream"})
    return status, out


def test_a_plain_sse_body_loses_no_chunk(stack):
    """docs/streaming.md's own kind of body: `data:` lines only, every one a chunk."""
    status, out = send(stack, sse(data(FIRST), data(LAST), "data: [DONE]"))
    assert status == 200, out
    assert events(out)[-1] == "[DONE]" and len(events(out)) == 3, out
    assert text_of(out) == "Hello, world!"


def test_the_request_event_carries_the_shared_fields(stack):
    request = "event: request\n" + data({"chat_request": {"stop": [" world"]}})
    status, out = send(stack, sse(request, data(FIRST), data(LAST), "data: [DONE]"))
    assert status == 200 and text_of(out) == "Hello,", out
    status, out = send(stack, sse("event: request\n" + data({"model": "gpt-9"}), data(FIRST)))
    assert status == 404 and json.loads(out)["error"]["param"] == "model", out


def test_the_legacy_bare_first_line_still_holds_the_shared_fields(stack):
    body = (json.dumps({"chat_request": {"stop": [" world"]}}) + "\n").encode() + sse(data(FIRST), data(LAST))
    status, out = send(stack, body)
    assert status == 200 and text_of(out) == "Hello,", out


@pytest.mark.parametrize(("name", "body", "says"), [
    ("neither JSON nor an SSE field", b"hello there\n" + sse(data(FIRST)), "line 1"),
    ("a chunk that is not JSON", sse("data: {not json"), "Invalid generate chunk"),
    ("a chunk that is a JSON array", sse("data: [1, 2]"), "Invalid generate chunk"),
    ("a bare chunk where the shared fields go", (json.dumps(FIRST) + "\n").encode(), "choices"),
    ("shared fields nested 3,000 deep", ("event: request\ndata: {\"chat_request\": " + "[" * 3000 + "]" * 3000
                                         + "}\n\n").encode() + sse(data(FIRST)), "nested too deeply"),
    ("a bare first line nested 3,000 deep", ("{\"chat_request\": " + "[" * 3000 + "]" * 3000 + "}\n").encode()
     + sse(data(FIRST)), "nested too deeply"),
    ("a first chunk nested 3,000 deep", ("data: {\"metrics\": " + "[" * 3000 + "]" * 3000 + ", \"choices\": []}\n\n")
     .encode(), "nested too deeply"),
    ("an unknown event name", sse("event: nonsense\n" + data(FIRST)), "event"),
    ("the request event after a chunk", sse(data(FIRST), "event: request\n" + data({})), "before the first"),
])
def test_what_cannot_be_parsed_is_a_400(stack, name, body, says):
    status, out = send(stack, body)
    streamed = status == 200  # after the first chunk: the stream's error event
    error = json.loads(events(out)[-1] if streamed else out)["error"]
    assert error["code"] == 400 and says in error["message"], (name, status, out[:300])
    assert len(events(out)) == 2 if streamed else status == 400, ("one chunk, then the error", out)


# ------------------------------------------------------------------ raw HTTP


def open_stream(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(f"POST {SSE} HTTP/1.1\r\nHost: x\r\ncontent-type: text/event-stream\r\n"
                 "transfer-encoding: chunked\r\n\r\n".encode())
    return sock


def send_chunk(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")


def read_until(sock: socket.socket, marker: bytes, seen: bytes = b"") -> bytes:
    while marker not in seen:
        part = sock.recv(65536)
        if not part:
            raise AssertionError(f"connection closed before {marker!r}: {seen!r}")
        seen += part
    return seen


def test_a_redis_error_mid_stream_ends_it_with_an_error_event(prefix):
    server = RedisProcess().start()
    s = Stack(server.url, prefix, workers=1).start()
    try:
        sock = open_stream(s.api_port)
        send_chunk(sock, b"{}\n" + sse(data(FIRST)))  # the bare shared-fields line: every version's framing
        seen = read_until(sock, b"Hello")  # the headers and the first chunk went out
        server.stop()
        send_chunk(sock, sse(data(LAST)))
        seen = read_until(sock, b"0\r\n\r\n", seen)  # the response ends properly
        error = json.loads(seen.split(b"data: ")[-1].split(b"\n\n")[0])["error"]
        assert error["code"] == 503 and "Redis" in error["message"], seen
        sock.close()
    finally:
        s.close()
        server.close()


def test_a_client_that_leaves_has_its_queued_chunk_job_withdrawn(redis_server, prefix):
    # Nobody takes the job: its pending key, watched below, is what a withdrawal deletes.
    s = Stack(redis_server.url, prefix, workers=0).start()
    r = redis.Redis.from_url(redis_server.url)
    pending = f"{prefix}:{{s0}}:job:*"
    try:
        sock = open_stream(s.api_port)
        send_chunk(sock, b"{}\n" + sse(data(FIRST)))
        wait_until(lambda: len(list(r.scan_iter(pending))) == 1, 15, 0.05, "the chunk's job queued")
        assert r.llen(Keys(prefix).lane("s0", "deepseek-v4")) == 1
        sock.close()
        wait_until(lambda: not list(r.scan_iter(pending)), 15, 0.05, "the job withdrawn")
        start = time.monotonic()
        assert post(s.url + "/health", b"")[0] in (200, 405) and time.monotonic() - start < 5
    finally:
        s.close()


def test_a_stream_that_sends_nothing_is_408_after_the_idle_timeout(redis_server, prefix):
    """Issue 31 item 13: headers, then nothing, held the request open for ever;
    as on the synchronous routes it is a 408 after DERENDER_BODY_IDLE_TIMEOUT_S
    and the connection closed. Once the stream has begun, the 408 is its last event."""
    s = Stack(redis_server.url, prefix, workers=1, extra_env={"DERENDER_BODY_IDLE_TIMEOUT_S": "1"}).start()
    try:
        sock = open_stream(s.api_port)  # its 30 s socket timeout is the test's deadline
        seen = read_until(sock, b"\r\n\r\n")
        assert seen.startswith(b"HTTP/1.1 408") and b"connection: close" in seen.lower(), seen
        while sock.recv(65536):
            pass  # the server closes it
        sock.close()

        sock = open_stream(s.api_port)
        send_chunk(sock, b"{}\n" + sse(data(FIRST)))
        seen = read_until(sock, b"0\r\n\r\n", read_until(sock, b"Hello"))  # then nothing more is sent
        error = json.loads(seen.split(b"data: ")[-1].split(b"\n\n")[0])["error"]
        assert error["code"] == 408 and "no request body bytes" in error["message"], seen
        sock.close()
    finally:
        s.close()


def test_a_client_that_waits_for_each_answer_is_not_idle_while_it_is_derendered(redis_server, prefix):
    """The idle timeout counts only while no chunk of the stream is being
    answered: each job here takes longer than it, and the client sends its
    next chunk only once it has the answer to the one before."""
    env = {"DERENDER_BODY_IDLE_TIMEOUT_S": "1", "DERENDER_DEBUG_JOB_DELAY_S": "1.5"}
    s = Stack(redis_server.url, prefix, workers=1, extra_env=env).start()
    try:
        sock = open_stream(s.api_port)
        send_chunk(sock, b"{}\n" + sse(data(FIRST)))
        seen = read_until(sock, b"Hello")
        send_chunk(sock, sse(data(LAST)))
        sock.sendall(b"0\r\n\r\n")
        seen = read_until(sock, b"0\r\n\r\n", seen)
        assert b"data: [DONE]" in seen and b'"error"' not in seen, seen
        sock.close()
    finally:
        s.close()
