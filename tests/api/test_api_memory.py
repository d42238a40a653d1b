"""Peak API memory under hostile loads, on a real API process (issue 31 item
12): what a client can make the API hold is bounded by the bytes-in-flight
budget and the request head limits, whoever the client is. Peak RSS is read
from /proc (VmHWM), so it is no timing figure: a loaded machine changes when
the peak comes, not how high it is.

- three SSE requests of 34 lines of 4 MiB each, against a 32 MiB budget: the
  chunks read ahead of the one being derendered count in the budget;
- six connections each sending a 48 MiB header line that never ends, before
  any authentication: refused (431) once the head passes its limit;
- 150 connections that send part of a head and then nothing: closed (408)
  once the head's time is up.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.helpers.stack import Stack, metric

pytestmark = pytest.mark.slow  # real processes (docs/development.md: test tiers)
MIB = 1 << 20
SSE = "/v1/chat/completions/derender/sse"


def memory_mib(pid: int, field: str) -> float:
    """A /proc/PID/status figure in MiB: VmRSS (now) or VmHWM (the peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def peak_growth_mib(stack: Stack, load: Callable[[], None]) -> float:
    """How far the API's peak RSS rose above its resident size before `load`."""
    pid = stack.procs[0].pid  # `derender api` serves in its own process
    before = memory_mib(pid, "VmRSS")
    load()
    growth = memory_mib(pid, "VmHWM") - before
    print(f"API RSS {before:.0f} MiB before, peak {before + growth:.0f} MiB (+{growth:.0f})")
    return growth


def padded_chunk(index: int, size: int) -> bytes:
    """A generate chunk of `size` bytes: one token, then JSON whitespace."""
    chunk = json.dumps({"request_id": "m", "choices": [{"index": 0, "token_ids": [14 + index % 2]}]}).encode()
    return b"data: " + chunk[:-1] + b" " * (size - len(chunk) - 7) + b"}\n"


def sse_stream(port: int, lines: Iterator[bytes]) -> bytes:
    """One chunked SSE request, its body sent while its response is read; the whole response."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    sock.sendall(f"POST {SSE} HTTP/1.1\r\nHost: x\r\ncontent-type: text/event-stream\r\n"
                 "transfer-encoding: chunked\r\n\r\n".encode())

    def send() -> None:
        with sock.makefile("wb") as out:
            for line in lines:
                out.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
            out.write(b"0\r\n\r\n")

    sender = threading.Thread(target=send)
    sender.start()
    seen = b""
    while not seen.endswith(b"0\r\n\r\n"):  # the socket's own timeout is the deadline
        part = sock.recv(MIB)
        assert part, seen[-300:]
        seen += part
    sender.join()
    sock.close()
    return seen


def test_sse_read_ahead_is_inside_the_bytes_in_flight_budget(redis_server, prefix):
    s = Stack(redis_server.url, prefix, workers=1, extra_env={
        "DERENDER_MAX_INFLIGHT_BYTES": str(32 * MIB), "DERENDER_DEBUG_JOB_DELAY_S": "0.3"}).start()
    answers: list[bytes] = []

    def load() -> None:
        with ThreadPoolExecutor(3) as pool:
            streams = [pool.submit(sse_stream, s.api_port, (padded_chunk(i, 4 * MIB) for i in range(34)))
                       for _ in range(3)]
            answers.extend(f.result() for f in streams)

    try:
        growth = peak_growth_mib(s, load)
    finally:
        s.close()
    for answer in answers:
        events = [e for e in answer.split(b"\n\n") if b"data: " in e]
        assert len(events) == 35 and events[-1].endswith(b"data: [DONE]"), events[-1][-300:]
    assert growth < 4 * 32, f"peak API RSS grew by {growth:.0f} MiB with a 32 MiB budget"


def unfinished_header(port: int, size: int) -> None:
    """Send a header line of `size` bytes that never ends (the server may cut it off)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    piece = b"a" * MIB
    try:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ")
        for _ in range(size // MIB):
            sock.sendall(piece)
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused: the server closed the connection
    finally:
        sock.close()


def test_header_lines_that_never_end_are_cut_off_at_the_head_limit(redis_server, prefix):
    s = Stack(redis_server.url, prefix, workers=0).start()
    try:
        big = socket.create_connection(("127.0.0.1", s.api_port), timeout=30)  # a large head that ends is served
        big.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Trace: " + b"t" * 60_000 + b"\r\n\r\n")
        assert big.recv(65536).startswith(b"HTTP/1.1 200"), "a 60 kB head is refused"
        big.close()
        with ThreadPoolExecutor(6) as pool:
            growth = peak_growth_mib(s, lambda: list(pool.map(lambda _: unfinished_header(s.api_port, 48 * MIB),
                                                              range(6))))
        assert growth < 16, f"peak API RSS grew by {growth:.0f} MiB"
        assert metric(s.url + "/metrics", "derender_api_rejected_total", reason="head_too_large") == 6
    finally:
        s.close()


def test_heads_that_never_end_are_408_and_closed_after_the_timeout(redis_server, prefix):
    s = Stack(redis_server.url, prefix, workers=0, extra_env={"DERENDER_BODY_IDLE_TIMEOUT_S": "1"}).start()
    socks: list[socket.socket] = []

    def load() -> None:
        for n in range(150):
            sock = socket.create_connection(("127.0.0.1", s.api_port), timeout=30)  # the test's deadline
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Part: " if n else b"")  # the first sends nothing
            socks.append(sock)
        for sock in socks:
            reply = b""
            while part := sock.recv(65536):  # until the server closes it
                reply += part
            assert reply.startswith(b"HTTP/1.1 408") and b'"code":408' in reply, reply
            sock.close()

    try:
        peak_growth_mib(s, load)
        assert metric(s.url + "/metrics", "derender_api_rejected_total", reason="head_timeout") == 150
    finally:
        s.close()
