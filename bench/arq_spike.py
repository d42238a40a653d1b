"""Spike: what stock arq 0.28 costs per job on this machine (it decided the design).

    python bench/arq_spike.py [--jobs 300]

Against a private redis-server, with a no-op job function and the worker in
its own process, for several `poll_delay` values it measures: job pickup
(enqueue -> function start), the round trip a client sees with
`Job.result()`, Redis commands per job (INFO commandstats), idle worker CPU,
and throughput of a burst of jobs.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

# bench/queue.py must not shadow the stdlib `queue` (redis imports it).
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.append(str(Path(__file__).resolve().parent.parent / "tests"))

from arq import Worker, create_pool  # noqa: E402
from arq.connections import RedisSettings  # noqa: E402
from redis.asyncio import Redis  # noqa: E402

from tests.helpers.redis_process import RedisProcess  # noqa: E402


async def noop(ctx, sent_ns: int) -> int:
    return time.time_ns() - sent_ns  # pickup latency, ns


def run_worker(url: str, poll_delay: float) -> None:
    worker = Worker(
        functions=[noop], redis_settings=RedisSettings.from_dsn(url), poll_delay=poll_delay,
        max_jobs=64, handle_signals=True, keep_result=60, log_results=False,
    )
    worker.run()


async def commands(redis: Redis) -> int:
    stats = await redis.info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k.startswith("cmdstat_"))


def cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(url: str, poll_delay: float, jobs: int) -> dict:
    proc = mp.get_context("spawn").Process(target=run_worker, args=(url, poll_delay), daemon=True)
    proc.start()
    pool = await create_pool(RedisSettings.from_dsn(url))
    redis = Redis.from_url(url)
    await (await pool.enqueue_job("noop", time.time_ns())).result(timeout=30, poll_delay=0.01)  # warm
    pickups, trips = [], []
    before = await commands(redis)
    for _ in range(jobs):
        t = time.perf_counter()
        job = await pool.enqueue_job("noop", time.time_ns())
        pickups.append(await job.result(timeout=30, poll_delay=0.5) / 1e6)
        trips.append((time.perf_counter() - t) * 1000)
    per_job = (await commands(redis) - before) / jobs
    idle0 = cpu_of(proc.pid)
    await asyncio.sleep(3)
    idle_cpu = (cpu_of(proc.pid) - idle0) / 3
    t = time.perf_counter()
    burst = [await pool.enqueue_job("noop", time.time_ns()) for _ in range(jobs)]
    for job in burst:
        await job.result(timeout=60, poll_delay=0.05)
    rate = jobs / (time.perf_counter() - t)
    proc.terminate()
    proc.join()
    await pool.aclose()
    await redis.aclose()
    return {
        "poll_delay_s": poll_delay,
        "pickup_p50_ms": statistics.median(pickups),
        "result_roundtrip_p50_ms": statistics.median(trips),
        "redis_cmds_per_job": per_job,
        "idle_worker_cpu": idle_cpu,
        "burst_jobs_per_s": rate,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--poll-delays", default="0.5,0.01,0.001")
    args = ap.parse_args()
    print("| poll_delay | pickup p50 ms | Job.result() round trip p50 ms | Redis cmds/job "
          "| idle worker CPU | burst jobs/s |")
    print("|---|---|---|---|---|---|")
    with RedisProcess() as server:
        for delay in map(float, args.poll_delays.split(",")):
            r = asyncio.run(measure(server.url, delay, args.jobs))
            print(f"| {delay} | {r['pickup_p50_ms']:.1f} | {r['result_roundtrip_p50_ms']:.1f} | "
                  f"{r['redis_cmds_per_job']:.1f} | {r['idle_worker_cpu']:.0%} | {r['burst_jobs_per_s']:.0f} |")


if __name__ == "__main__":
    main()
