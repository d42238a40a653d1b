"""Bytes in flight: API memory under a burst of large bodies (issue 12, item 11).

    python bench/inflight.py [--clients 32] [--mb 20] [--budgets default,0] [--settle 30] [--runs 1]

A private redis-server, one `derender api` and one `derender worker`. Per
budget (`DERENDER_MAX_INFLIGHT_BYTES`; `default` leaves the setting unset, 0
is no limit), `--clients` clients each send one `--mb` MB derender body at
once (a small valid request padded with an unknown field: the API reads and
enqueues it whole, the worker parses it whole) and retry a 503 after its
Retry-After, as a well-behaved client does. It samples the API's RSS every
20 ms and reads its peak (VmHWM) at the end of the burst, then waits
`--settle` seconds and reads RSS again. Targets: peak <= 2.5 x budget + 150 MB;
RSS after settling <= idle + 100 MB. CPU seconds of the API process (and of
this client) are printed beside wall time. To measure another checkout's
code (e.g. before a change), run this script from inside that checkout's
directory: the processes run the code of their working directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# bench/queue.py is named like the stdlib `queue` (which redis imports): keep
# this folder off the front of sys.path.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT)]  # tests.helpers

from tests.helpers.redis_process import RedisProcess  # noqa: E402
from tests.helpers.stack import Stack, post  # noqa: E402

MB = 1_000_000
MIB = 2**20
CHAT = "/v1/chat/completions/derender"


def status_kb(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def body_parts(tag: str, pad: bytes) -> tuple[bytes, bytes, bytes]:
    """A valid chat body with `pad` as an unknown field; the pad is shared
    by every client (sent, never copied)."""
    head = json.dumps({"model": "deepseek-v4", "generate_response": {"request_id": tag, "choices": [
        {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}]}})[:-1]
    return head.encode() + b', "pad": "', pad, b'"}'


async def one_request(port: int, tag: str, pad: bytes, refused: list[int]) -> int:
    """Send until answered with something other than 503; the final status."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        parts = body_parts(tag, pad)
        size = sum(len(p) for p in parts)
        while True:
            writer.write(f"POST {CHAT} HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
                         f"content-length: {size}\r\n\r\n".encode())
            for part in parts:
                writer.write(part)
            await writer.drain()
            status = int((await reader.readline()).split()[1])
            length, retry = 0, 1.0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
                if name.strip().lower() == b"retry-after":
                    retry = float(value)
            await reader.readexactly(length)
            if status != 503:
                return status
            refused.append(1)
            await asyncio.sleep(retry)
    finally:
        writer.close()


def burst(port: int, clients: int, pad: bytes) -> tuple[list[int], int, float]:
    refused: list[int] = []

    async def run() -> list[int]:
        return list(await asyncio.gather(*(one_request(port, f"b{i}", pad, refused) for i in range(clients))))

    start = time.perf_counter()
    statuses = asyncio.run(run())
    return statuses, len(refused), time.perf_counter() - start


def measure(redis_url: str, budget: str, clients: int, size_mb: int, settle: float) -> dict:
    env = {"DERENDER_MAX_BODY_BYTES": str(64 * MIB), "DERENDER_REQUEST_TIMEOUT_S": "120"}
    if budget != "default":
        env["DERENDER_MAX_INFLIGHT_BYTES"] = budget
    s = Stack(redis_url, f"inflight{budget}", workers=1, extra_env=env).start()
    try:
        api = s.procs[0].pid
        for i in range(5):  # warm: imports, connections, the first job
            assert post(s.url + CHAT, b"".join(body_parts(f"w{i}", b"x" * 1000)))[0] == 200
        idle_kb = status_kb(api, "VmRSS")
        samples: list[int] = []
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                samples.append(status_kb(api, "VmRSS"))
                time.sleep(0.02)

        sampler = threading.Thread(target=sample)
        sampler.start()
        cpu0, own0 = cpu_s(api), time.process_time()
        statuses, refused, wall = burst(s.api_port, clients, b"x" * (size_mb * MB))
        cpu, own = cpu_s(api) - cpu0, time.process_time() - own0
        done.set()
        sampler.join()
        peak_kb = status_kb(api, "VmHWM")
        time.sleep(settle)
        after_kb = status_kb(api, "VmRSS")
        limit = 256 * MIB if budget == "default" else int(budget)
        return {"budget": budget, "limit_mb": limit / MB, "ok": statuses.count(200), "other": len(statuses) -
                statuses.count(200), "refused_503": refused, "wall_s": wall, "api_cpu_s": cpu, "client_cpu_s": own,
                "idle_mb": idle_kb * 1024 / MB, "peak_mb": peak_kb * 1024 / MB,
                "median_sampled_mb": statistics.median(samples) * 1024 / MB if samples else 0.0,
                "after_mb": after_kb * 1024 / MB}
    finally:
        s.close()


def report(r: dict, settle: float) -> str:
    peak_target = 2.5 * r["limit_mb"] + 150 if r["limit_mb"] else float("inf")
    after_target = r["idle_mb"] + 100
    return (f"budget {r['budget']} ({r['limit_mb']:.0f} MB): {r['ok']} x 200, {r['other']} other, "
            f"{r['refused_503']} x 503 retried; wall {r['wall_s']:.1f} s, API CPU {r['api_cpu_s']:.1f} s, "
            f"client CPU {r['client_cpu_s']:.1f} s\n"
            f"  API RSS: idle {r['idle_mb']:.0f} MB, peak {r['peak_mb']:.0f} MB (target <= {peak_target:.0f}: "
            f"{'ok' if r['peak_mb'] <= peak_target else 'OVER'}), median during burst "
            f"{r['median_sampled_mb']:.0f} MB, {settle:g} s after {r['after_mb']:.0f} MB (target <= "
            f"{after_target:.0f}: {'ok' if r['after_mb'] <= after_target else 'OVER'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--mb", type=int, default=20)
    parser.add_argument("--budgets", default="default,0")
    parser.add_argument("--settle", type=float, default=30.0)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    print(f"{args.clients} clients x {args.mb} MB at once; code from {os.getcwd()}", flush=True)
    with RedisProcess() as redis:
        for budget in args.budgets.split(","):
            results = [measure(redis.url, budget, args.clients, args.mb, args.settle) for _ in range(args.runs)]
            for r in results:
                print(report(r, args.settle), flush=True)
            if len(results) > 1:
                print(f"  median of {len(results)}: peak {statistics.median(r['peak_mb'] for r in results):.0f} MB,"
                      f" after {statistics.median(r['after_mb'] for r in results):.0f} MB, wall "
                      f"{statistics.median(r['wall_s'] for r in results):.1f} s", flush=True)


if __name__ == "__main__":
    main()
