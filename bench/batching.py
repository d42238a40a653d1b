"""Dynamic batching on and off, side by side in one run (wire format v2).

    python bench/batching.py [--seconds 4] [--rounds 2]

Starts a private redis-server and two `derender worker` processes, then for
16-token chat derenders through the Python client, alternating batching off
and on `--rounds` times: throughput with 64 jobs in flight and the CPU per
job summed over every process (client, workers and their children, Redis),
and the median and p99 latency with 1, 2, 4 and 8 clients each sending one
job after another. Medians over the rounds; ratios on/off.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]  # bench/queue.py shadows queue
sys.path[:0] = [str(ROOT)]
sys.path += [str(ROOT / "tests"), str(ROOT / "bench")]

from measure import body16, pct, tree_cpu_seconds  # noqa: E402

from derender_queue.wire.client import DerenderClient  # noqa: E402
from tests.helpers.redis_process import RedisProcess  # noqa: E402
from tests.helpers.stack import Stack  # noqa: E402

CLIENTS = (1, 2, 4, 8)


async def throughput(url: str, batching: bool, seconds: float, pids: list[int]) -> tuple[float, float]:
    """(jobs/s, CPU µs per job over every process) with 64 in flight."""
    async with DerenderClient(url, key_prefix="bench", batching=batching) as client:
        for _ in range(50):
            await client.derender_chat(body16())
        sem, body, jobs = asyncio.Semaphore(64), body16(), int(seconds * 1500)

        async def one() -> None:
            async with sem:
                await client.derender_chat(body)

        cpu0, own0, t = tree_cpu_seconds(pids), time.process_time(), time.perf_counter()
        await asyncio.gather(*(one() for _ in range(jobs)))
        elapsed = time.perf_counter() - t
        cpu = tree_cpu_seconds(pids) - cpu0 + time.process_time() - own0
        return jobs / elapsed, cpu / jobs * 1e6


async def latency(url: str, batching: bool, clients: int, seconds: float) -> list[float]:
    """Per-job latency (ms) of `clients` clients each sending one job after another."""
    async with DerenderClient(url, key_prefix="bench", batching=batching) as client:
        body, out, end = body16(), [], time.perf_counter() + seconds

        async def loop() -> None:
            while time.perf_counter() < end:
                t = time.perf_counter()
                await client.derender_chat(body)
                out.append((time.perf_counter() - t) * 1000)

        await asyncio.gather(*(loop() for _ in range(clients)))
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    thr: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    lat: dict[tuple[bool, int], list[float]] = {}
    with RedisProcess() as redis:
        stack = Stack(redis.url, "bench", workers=2, extra_env={}).start()
        try:
            pids = [p.pid for p in stack.procs] + [redis.proc.pid]
            for _ in range(args.rounds):
                for batching in (False, True):
                    thr[batching].append(asyncio.run(throughput(redis.url, batching, args.seconds, pids)))
                    for clients in CLIENTS:
                        lat.setdefault((batching, clients), []).extend(
                            asyncio.run(latency(redis.url, batching, clients, args.seconds / 2)))
        finally:
            stack.close()
    med = statistics.median
    print(f"wire format v2, 2 workers, 16-token chat derenders, {args.rounds} rounds alternating off/on\n")
    print("| | batching off | batching on | on/off |")
    print("|---|---|---|---|")
    off, on = med(t for t, _ in thr[False]), med(t for t, _ in thr[True])
    print(f"| jobs/s, 64 in flight (median of rounds) | {off:.0f} | {on:.0f} | {on / off:.2f}x |")
    off, on = med(c for _, c in thr[False]), med(c for _, c in thr[True])
    print(f"| CPU per job, every process (µs) | {off:.0f} | {on:.0f} | {on / off:.2f}x |")
    for clients in CLIENTS:
        a, b = lat[(False, clients)], lat[(True, clients)]
        print(f"| latency p50 / p99, {clients} client(s) (ms) | {med(a):.2f} / {pct(a, .99):.2f} | "
              f"{med(b):.2f} / {pct(b, .99):.2f} | {med(b) / med(a):.2f}x |")


if __name__ == "__main__":
    main()
