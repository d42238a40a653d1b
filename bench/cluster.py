"""One Redis against a Redis Cluster, in one run: what a job costs Redis and
how fast the stack goes on each (docs/cluster.md).

    python bench/cluster.py [--rounds 3] [--seconds 4] [--n 500] [--heavy 300] [--masters 3]

Each round starts, one after the other, a private redis-server and a local
cluster of `--masters` masters (no replicas: the same work as the single
node), each with two `derender worker` processes and an API, and measures
through the Python client (wire format v2, batching on, the defaults):

- the idle 16-token round trip (p50 of `--n` sequential jobs);
- small jobs, 64 in flight for `--seconds`: jobs/s, CPU per job summed over
  every process (client, API, workers and their children, every Redis);
- heavy jobs (4000 tokens with top-5 logprobs, about 0.5 MB each way), 8 in
  flight: jobs/s;
- per job, what Redis itself spends: commands (INFO commandstats, those run
  by scripts included), bytes in and out (INFO stats), and Redis CPU, summed
  over every master; and from that, jobs per second per Redis core.

Medians over the rounds. Two cores run everything here, client and Redis
included: compare the two targets within a run, not with a bigger machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# bench/queue.py is named like the stdlib `queue` (which redis imports): keep
# this folder off the front of sys.path and look there last.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT)]
sys.path += [str(ROOT / "tests"), str(ROOT / "bench")]

from bodies import BodyMaker  # noqa: E402
from measure import body16, cpu_seconds, sequential_ms, tree_cpu_seconds  # noqa: E402
from redis import Redis  # noqa: E402

from derender_queue.core import ModelRegistry, read_models_config  # noqa: E402
from derender_queue.wire.client import DerenderClient  # noqa: E402
from tests.helpers.redis_cluster import LocalCluster  # noqa: E402
from tests.helpers.redis_process import RedisProcess  # noqa: E402
from tests.helpers.stack import Stack  # noqa: E402

PREFIX = "bench"


@contextlib.contextmanager
def target(kind: str, masters: int) -> Iterator[tuple[str, list[Redis], list[int]]]:
    """(URL, a client of each master, every Redis process id)."""
    if kind == "one Redis":
        with RedisProcess() as server:
            assert server.proc is not None
            yield server.url, [Redis.from_url(server.url)], [server.proc.pid]
    else:
        with LocalCluster(masters=masters, replicas=0, node_timeout_ms=15000) as cluster:
            pids = [node.proc.pid for node in cluster.nodes.values() if node.proc is not None]
            yield cluster.url, [cluster.client(port) for port in cluster.masters()], pids


def redis_counters(admins: list[Redis]) -> tuple[int, int]:
    """(commands, bytes in + out) so far, summed over the masters."""
    commands = bytes_ = 0
    for admin in admins:
        commands += sum(int(v["calls"]) for k, v in admin.info("commandstats").items() if k != "cmdstat_info")
        stats = admin.info("stats")
        bytes_ += int(stats["total_net_input_bytes"]) + int(stats["total_net_output_bytes"])
    return commands, bytes_


async def sequential(url: str, body: bytes, n: int) -> list[float]:
    async with DerenderClient(url, key_prefix=PREFIX) as client:
        return await sequential_ms(client, body, n)


async def loaded(url: str, bodies: list[bytes], jobs: int, in_flight: int) -> float:
    """Seconds to run `jobs` jobs with `in_flight` at a time."""
    async with DerenderClient(url, key_prefix=PREFIX) as client:
        await client.derender_chat(bodies[0])
        sem = asyncio.Semaphore(in_flight)

        async def one(i: int) -> None:
            async with sem:
                await client.derender_chat(bodies[i % len(bodies)], timeout=120)

        t = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(jobs)))
        return time.perf_counter() - t


def costs(url: str, admins: list[Redis], redis_pids: list[int], stack: Stack, bodies: list[bytes], jobs: int,
          in_flight: int) -> dict[str, float]:
    """Throughput and per-job costs of `jobs` jobs."""
    everyone = [p.pid for p in stack.procs] + redis_pids
    (commands0, bytes0), redis0 = redis_counters(admins), sum(cpu_seconds(p) for p in redis_pids)
    tree0, own0 = tree_cpu_seconds(everyone), time.process_time()
    elapsed = asyncio.run(loaded(url, bodies, jobs, in_flight))
    (commands1, bytes1), redis1 = redis_counters(admins), sum(cpu_seconds(p) for p in redis_pids)
    tree1, own1 = tree_cpu_seconds(everyone), time.process_time()
    return {"jobs_per_s": jobs / elapsed, "cpu_us": (tree1 - tree0 + own1 - own0) / jobs * 1e6,
            "redis_cpu_us": (redis1 - redis0) / jobs * 1e6, "commands": (commands1 - commands0) / jobs,
            "kib": (bytes1 - bytes0) / jobs / 1024}


def measure(kind: str, args: argparse.Namespace, heavy: list[bytes]) -> dict[str, float]:
    with target(kind, args.masters) as (url, admins, redis_pids):
        stack = Stack(url, PREFIX, workers=2).start()
        try:
            idle = statistics.median(asyncio.run(sequential(url, body16(), args.n)))
            small = costs(url, admins, redis_pids, stack, [body16()], int(args.seconds * 1000), 64)
            big = costs(url, admins, redis_pids, stack, heavy, args.heavy, 8)
        finally:
            stack.close()
    row = {"idle_p50_ms": idle}
    row.update({f"small_{k}": v for k, v in small.items()})
    row.update({f"heavy_{k}": v for k, v in big.items()})
    return row


ROWS = [
    ("idle 16-token round trip p50 (ms)", "idle_p50_ms", "{:.2f}"),
    ("small jobs/s (64 in flight)", "small_jobs_per_s", "{:,.0f}"),
    ("small: CPU per job, all processes (us)", "small_cpu_us", "{:,.0f}"),
    ("small: Redis CPU per job, all masters (us)", "small_redis_cpu_us", "{:.1f}"),
    ("small: Redis commands per job", "small_commands", "{:.1f}"),
    ("small: Redis KiB in+out per job", "small_kib", "{:.2f}"),
    ("heavy jobs/s (4000 tokens, top-5, 8 in flight)", "heavy_jobs_per_s", "{:,.0f}"),
    ("heavy: Redis CPU per job, all masters (us)", "heavy_redis_cpu_us", "{:.0f}"),
    ("heavy: Redis commands per job", "heavy_commands", "{:.1f}"),
    ("heavy: Redis KiB in+out per job", "heavy_kib", "{:,.0f}"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--heavy", type=int, default=300)
    ap.add_argument("--masters", type=int, default=3)
    args = ap.parse_args()
    maker = BodyMaker(ModelRegistry(read_models_config(None), preload=False).get(None).vocab.tokenizer)
    heavy = [maker.chat(4000, 5) for _ in range(8)]
    kinds = ("one Redis", f"cluster, {args.masters} masters")
    runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
    for _ in range(args.rounds):
        for kind in kinds:
            runs[kind].append(measure(kind, args, heavy))
    med = {kind: {key: statistics.median(r[key] for r in rows) for key in rows[0]} for kind, rows in runs.items()}
    print(f"{args.rounds} round(s), medians; heavy body {len(heavy[0]) / 1024:.0f} KiB\n")
    print(f"| | {kinds[0]} | {kinds[1]} | ratio |")
    print("|---|---|---|---|")
    for name, key, fmt in ROWS:
        a, b = med[kinds[0]][key], med[kinds[1]][key]
        print(f"| {name} | {fmt.format(a)} | {fmt.format(b)} | {b / a:.2f}x |")
    for kind in kinds:
        small, big = med[kind]["small_redis_cpu_us"], med[kind]["heavy_redis_cpu_us"]
        print(f"\n{kind}: per Redis core, {1e6 / small:,.0f} small jobs/s or {1e6 / big:,.0f} heavy jobs/s "
              "(1 s / Redis CPU per job)")


if __name__ == "__main__":
    main()
