"""Scale-out: heavy-job throughput with 1 and 2 worker processes on one host,
and how cost grows with tokens and with concurrency.

    python bench/scale.py [--seconds 15]

A private redis-server and `derender worker --processes P`; producers use the
Python client (no API in the path; bytes in, bytes out), 8 in flight, heavy = 4000-token chat
derenders with top-5 logprobs. Reports tokens derendered per second, latency
p50/p99 and the CPU the worker processes used (cores busy). Then, with one
process: cost per job against tokens (with the fitted per-token constant) and
against concurrency.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT)]
sys.path += [str(ROOT / "tests"), str(ROOT / "bench")]

from bodies import BodyMaker  # noqa: E402
from measure import process_tree_cpu  # noqa: E402

from derender_queue.core import ModelRegistry, read_models_config  # noqa: E402
from derender_queue.wire.client import DerenderClient  # noqa: E402
from tests.helpers.redis_process import RedisProcess  # noqa: E402
from tests.helpers.stack import Stack  # noqa: E402


async def load(url: str, prefix: str, bodies: list[bytes], in_flight: int, seconds: float) -> dict:
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds
    async with DerenderClient(url, key_prefix=prefix) as client:
        await client.derender_chat(bodies[0])

        async def producer(i: int) -> None:
            n = i
            while time.perf_counter() < stop_at:
                t = time.perf_counter()
                # Bytes in, bytes out, as a forwarding producer would: no JSON
                # in the client, so its CPU stays out of the workers' way.
                job_id = await client.submit("chat", bodies[n % len(bodies)], "deepseek-v4", deadline_s=120)
                result = await client.wait(job_id, timeout=120)
                assert result.status == 200, result.body[:200]
                latencies.append((time.perf_counter() - t) * 1000)
                n += in_flight

        start = time.perf_counter()
        await asyncio.gather(*(producer(i) for i in range(in_flight)))
        elapsed = time.perf_counter() - start
    latencies.sort()
    return {"jobs": len(latencies), "elapsed": elapsed, "p50": latencies[len(latencies) // 2],
            "p99": latencies[int(len(latencies) * 0.99)]}


def measure(redis: RedisProcess, processes: int, bodies: list[bytes], tokens: int, in_flight: int,
            seconds: float) -> dict:
    redis_url = redis.url
    stack = Stack(redis_url, f"scale{processes}", workers=0)
    proc = stack.start_worker(DERENDER_PROCESSES=str(processes))
    stack.start_api()
    stack.wait_ready(processes)
    try:
        cpu0, client0, redis0 = process_tree_cpu(proc.pid), time.process_time(), process_tree_cpu(redis.proc.pid)
        row = asyncio.run(load(redis_url, stack.prefix, bodies, in_flight, seconds))
        row["cores"] = (process_tree_cpu(proc.pid) - cpu0) / row["elapsed"]
        row["client_cores"] = (time.process_time() - client0) / row["elapsed"]
        row["redis_cores"] = (process_tree_cpu(redis.proc.pid) - redis0) / row["elapsed"]
        row["tokens_per_s"] = row["jobs"] * tokens / row["elapsed"]
        return row
    finally:
        stack.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=15)
    args = ap.parse_args()
    maker = BodyMaker(ModelRegistry(read_models_config(None), preload=False).get(None).vocab.tokenizer)
    heavy = [maker.chat(4000, 5) for _ in range(16)]
    with RedisProcess() as redis:
        rows = {p: measure(redis, p, heavy, 4000, 8, args.seconds) for p in (1, 2)}
        print("heavy jobs: 4000-token chat, top-5 logprobs, 8 in flight through the Python client\n")
        print("| worker processes | tokens/s | jobs/s | p50 ms | p99 ms | CPU cores: workers | client | redis |")
        print("|---|---|---|---|---|---|---|---|")
        for p, r in rows.items():
            print(f"| {p} | {r['tokens_per_s']:,.0f} | {r['jobs'] / r['elapsed']:.1f} | {r['p50']:.0f} | "
                  f"{r['p99']:.0f} | {r['cores']:.2f} | {r['client_cores']:.2f} | {r['redis_cores']:.2f} |")
        print(f"\n2 processes / 1 process: {rows[2]['tokens_per_s'] / rows[1]['tokens_per_s']:.2f}x")

        sizes = [500, 1000, 2000, 4000]
        by_size = {n: measure(redis, 1, [maker.chat(n, 5) for _ in range(8)], n, 1, args.seconds / 2) for n in sizes}
        print("\ncost against tokens (1 process, one job at a time, top-5):\n")
        print("| tokens | p50 ms per job | tokens/s |")
        print("|---|---|---|")
        for n, r in by_size.items():
            print(f"| {n} | {r['p50']:.1f} | {r['tokens_per_s']:,.0f} |")
        xs, ys = sizes, [by_size[n]["p50"] for n in sizes]
        mx, my = statistics.mean(xs), statistics.mean(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=False)) / sum((x - mx) ** 2 for x in xs)
        print(f"\nfit: {my - slope * mx:.2f} ms + {slope * 1000:.2f} us per token")

        print("\ncost against concurrency (1 process, 4000 tokens, top-5):\n")
        print("| in flight | jobs/s | p50 ms | p99 ms |")
        print("|---|---|---|---|")
        for c in (1, 2, 4, 8, 16):
            r = measure(redis, 1, heavy, 4000, c, args.seconds / 2)
            print(f"| {c} | {r['jobs'] / r['elapsed']:.1f} | {r['p50']:.0f} | {r['p99']:.0f} |")


if __name__ == "__main__":
    main()
