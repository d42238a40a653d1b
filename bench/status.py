"""Status page render time with 10 workers' heartbeats and activity present.

    python bench/status.py [--n 300]

Starts a private redis-server, one `derender worker` and a `derender api`,
writes 10 more workers' heartbeats (as a worker would, with every counter
set) and a full minute of activity each (every second busy), fills the
API's last minute with a few hundred derenders (some of them errors), then
times `GET /status` and `GET /status.json` sequentially on one keep-alive
connection (the page's whole cost on the API: three Redis round
trips, a pipeline per model and the rendering), and `render_page` alone in
process on a full window (60 busy seconds, a full error ring).
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# bench/queue.py would shadow the stdlib `queue` (which redis imports).
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import msgspec  # noqa: E402
import redis  # noqa: E402

from api.recent import MAX_ERRORS, Recent  # noqa: E402
from api.status_data import Minute, QueueRow, Status, WorkerRow  # noqa: E402
from api.status_page import render_page  # noqa: E402
from api.workload import system  # noqa: E402
from derender_queue.wire.activity import WAIT_BOUNDS_S, WINDOW_S, WorkerSecond, encode  # noqa: E402
from derender_queue.wire.heartbeat import Heartbeat  # noqa: E402
from derender_queue.wire.keys import Keys, now_ms  # noqa: E402
from tests.helpers.redis_process import RedisProcess  # noqa: E402
from tests.helpers.stack import Stack  # noqa: E402

PREFIX = "bench"
CHAT = "/v1/chat/completions/derender"


def fake_heartbeats(url: str, n: int) -> None:
    keys, client = Keys(PREFIX), redis.Redis.from_url(url)
    for i in range(n):
        beat = Heartbeat(f"fake{i:02d}", f"host-{i % 3}", 1000 + i, {"deepseek-v4": "0123456789abcdef" * 4}, 16,
                         now_ms(), now_ms(), busy=i % 3, executors=2, jobs_done=1000 * i, client_errors=i, errors=0)
        client.set(keys.worker(beat.id), msgspec.json.encode(beat), px=600_000)
        client.zadd(keys.workers, {beat.id: now_ms() + 600_000})
        client.set(keys.activity(beat.id), encode(busy_minute(int(time.time()))), px=600_000)
    client.close()


def busy_minute(now_s: int) -> list[WorkerSecond]:
    """A worker's activity with every second of the window busy (its largest value)."""
    return [WorkerSecond(t, 300 + t % 7, 3, 1, 4000, [t % 50 + i for i in range(len(WAIT_BOUNDS_S) + 1)])
            for t in range(now_s - WINDOW_S, now_s)]


def body(ids: list[int]) -> bytes:
    return json.dumps({"generate_response": {"request_id": "b", "choices": [
        {"index": 0, "token_ids": ids, "finish_reason": "stop"}]}}).encode()


def timed_gets(conn: http.client.HTTPConnection, path: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        assert response.status == 200, response.status
        out.append((time.perf_counter() - t) * 1000)
    return out


def in_process(n: int) -> list[float]:
    recent = Recent(lambda: 1e9)
    for t in range(60):
        recent.clock = lambda t=t: 1e9 - 60 + t
        for i in range(200):
            recent.observe(0.001 * (1 + i % 50), 400 if i % 20 == 0 else 200)
    for i in range(MAX_ERRORS):
        recent.error(400, "token id 1000000000 in choice 0 token_ids is outside the vocabulary" * 2, f"job{i}",
                     "chat", f"client{i % 3}")
    recent.clock = lambda: 1e9
    workers = [WorkerRow(f"fake{i:02d}", "host", i, {"deepseek-v4": "ab" * 32}, 0.4, 1, 2, 16, 1000 * i, i, 0, 0)
               for i in range(10)]
    requests, p50, p99 = recent.minute()
    whole, per_second = system({w.id: busy_minute(10**9) for w in workers}, 10**9)
    status = Status(0, "ok", 0, None, workers, [QueueRow("deepseek-v4", 7, 10)], whole, per_second,
                    Minute(60, requests, requests / 60, 600, p50, p99), recent.seconds(), recent.errors())
    out = []
    for _ in range(n):
        t = time.perf_counter()
        render_page(status)
        out.append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=300)
    args = ap.parse_args()
    with RedisProcess() as server:
        stack = Stack(server.url, PREFIX, workers=1).start()
        try:
            fake_heartbeats(server.url, 10)
            conn = http.client.HTTPConnection("127.0.0.1", stack.api_port, timeout=30)
            for i in range(300):
                conn.request("POST", CHAT, body([10**9] if i % 10 == 0 else [19923, 14, 2058, 3, 1]),
                             {"content-type": "application/json"})
                conn.getresponse().read()
            conn.request("GET", "/status.json")
            snapshot = json.loads(conn.getresponse().read())
            timed_gets(conn, "/status", 20)  # warm
            page = timed_gets(conn, "/status", args.n)
            as_json = timed_gets(conn, "/status.json", args.n)
        finally:
            stack.close()
    local = in_process(args.n)
    q = statistics.quantiles
    print(f"status page, {len(snapshot['workers'])} live heartbeats, {snapshot['minute']['requests']} requests "
          f"and {len(snapshot['recent_errors'])} errors in the window; {args.n} sequential calls each (ms)\n")
    print("| what | median | p99 |")
    print("|---|---|---|")
    for name, values in (("GET /status over HTTP", page), ("GET /status.json over HTTP", as_json),
                         ("render_page in process (full window, 10 workers)", local)):
        print(f"| {name} | {statistics.median(values):.2f} | {q(values, n=100)[98]:.2f} |")


if __name__ == "__main__":
    main()
