"""Queue path speed: in-process derender vs the Python client vs the HTTP API.

    python bench/queue.py [--n 1000] [--seconds 5] [--min-replicas N [--replicas R]]

Starts a private redis-server, two `derender worker` processes and a
`derender api` on loopback, then, in one run, for a 16-token chat derender:
the in-process derender time, the sequential (idle) round trip through the
Python client and through the API, the queue's added latency, and throughput
of small jobs through the client (64 in flight) and the API (32 keep-alive
connections, driven by bench/httpload.py, whose own CPU is reported).
With `--min-replicas N` the Redis gets R replicas (default N) on loopback and
the API, workers and client wait for N of them on every submit and result
(DERENDER_MIN_REPLICAS): what durable acknowledgement costs. CPU per job
sums every process (client, API, workers and their children, Redis).
(`--wire 1,2` compared wire formats v1 and v2 until 0.2.0 removed v1:
bench/results/queue_v1_v2.txt.)

    python bench/queue.py --alternate ROUNDS [--stacks 0,1] [--baseline CHECKOUT]
                          [--http-client httpload[,httpx]] [--seconds 2]

Stacks side by side instead, each a private redis-server, an API and two
workers: one per `--stacks` value N, with DERENDER_MIN_REPLICAS=N on a Redis
with N replicas, and with `--baseline` one more running that checkout's code
(its processes run with PYTHONPATH set to it). Idle stacks cost nothing
(their workers block in BRPOP), so the rounds alternate between them (order
reversed every other round) and a busy or drifting machine hits all alike.
Per round, stack and HTTP client: the median of 200 sequential 16-token chat
derenders through the API, then 32 keep-alive connections for `--seconds`.
`--http-client httpload,httpx` drives every stack with bench/httpload.py and
with httpx (bench/httpx_load.py) in turns: the two load clients against the
same running service. Prints the medians over rounds, and each one's
per-round ratio to the first (median): the number to compare when the
machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# This file is named like the stdlib `queue` (which redis imports): keep its
# folder off the front of sys.path and look there last.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT)]
sys.path += [str(ROOT / "tests"), str(ROOT / "bench")]

from httpload import closed_loop, sequential  # noqa: E402
from measure import (  # noqa: E402
    Counts,
    PerJob,
    body16,
    cpu_seconds,
    pct,
    per_job,
    sequential_ms,
    snapshot,
    tree_cpu_seconds,
)
from redis import Redis  # noqa: E402

from derender_queue.core import Derenderer, ModelRegistry, read_models_config  # noqa: E402
from derender_queue.wire.client import DerenderClient  # noqa: E402
from derender_queue.wire.replication import MASTER_ONLY, Durability  # noqa: E402
from tests.helpers.redis_process import RedisProcess  # noqa: E402
from tests.helpers.sentinel_process import role, wait_for  # noqa: E402
from tests.helpers.stack import Stack  # noqa: E402

PATH = "/v1/chat/completions/derender"
HTTP_CLIENTS = {"httpload": "httpload", "httpx": "httpx_load"}
"""--http-client: the bench/ module of each (the same `sequential` and `closed_loop`)."""


def in_process(body: bytes, n: int) -> list[float]:
    derenderer = Derenderer(ModelRegistry(read_models_config(None)))
    out = []
    for _ in range(n):
        t = time.perf_counter()
        derenderer.derender("chat", body)
        out.append((time.perf_counter() - t) * 1000)
    return out


DURABILITY = MASTER_ONLY



async def client_sequential(url: str, prefix: str, body: bytes, n: int) -> list[float]:
    async with DerenderClient(url, key_prefix=prefix, durability=DURABILITY) as client:
        return await sequential_ms(client, body, n)


async def client_throughput(url: str, prefix: str, body: bytes, n: int, in_flight: int = 64) -> dict:
    async with DerenderClient(url, key_prefix=prefix, durability=DURABILITY) as client:
        sem = asyncio.Semaphore(in_flight)

        async def one() -> None:
            async with sem:
                await client.derender_chat(body)

        cpu0, t = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        elapsed = time.perf_counter() - t
        return {"jobs_per_s": n / elapsed, "client_cpu": (time.process_time() - cpu0) / elapsed}


def counted_idle(client: Redis, seconds: float) -> Counts:
    """The server's counters over `seconds` with no jobs (heartbeats, the API's watcher)."""
    before = snapshot(client)
    time.sleep(seconds)
    return snapshot(client) - before


def baseline_env(tree: Path) -> dict[str, str]:
    """Environment that makes `python -m ...` import `tree`'s code: PYTHONPATH alone is
    not enough, since -m puts the working directory (this checkout) first on the path."""
    env = {"PYTHONPATH": str(tree), "PYTHONSAFEPATH": "1"}
    probe = "import api, derender_queue, worker; print(api.__file__, derender_queue.__file__, worker.__file__)"
    out = subprocess.run([sys.executable, "-c", probe], env={**os.environ, **env}, check=True,
                         capture_output=True, text=True).stdout.split()
    if not all(Path(f).resolve().is_relative_to(tree) for f in out):
        raise SystemExit(f"the baseline's processes would not run {tree}'s code: {out}")
    return env


def alternate(body: bytes, args: argparse.Namespace) -> None:
    """--alternate: stacks side by side, each driven by each HTTP client, in alternating rounds."""
    clients = {name: importlib.import_module(HTTP_CLIENTS[name]) for name in args.http_client.split(",")}
    contenders: dict[str, tuple[int, Any]] = {}  # name: (the stack's API port, the HTTP client's module)
    with contextlib.ExitStack() as resources:
        stacks: dict[str, Stack] = {}
        if args.baseline:
            redis = resources.enter_context(RedisProcess())
            stacks["baseline"] = Stack(redis.url, "ab", workers=2, extra_env=baseline_env(args.baseline.resolve()))
        for level in (int(x) for x in args.stacks.split(",")):
            redis = resources.enter_context(RedisProcess())
            for _ in range(level):
                replica = resources.enter_context(RedisProcess(extra=("--replicaof", "127.0.0.1", str(redis.port))))
                wait_for(lambda replica=replica: role(replica.port)[3] == "connected", 30, "replica in sync")
            stacks[f"min_replicas={level}"] = Stack(redis.url, "ab", workers=2,
                                                    extra_env={"DERENDER_MIN_REPLICAS": str(level)})
        for name, stack in stacks.items():
            resources.callback(stack.close)
            stack.start()
            asyncio.run(sequential("127.0.0.1", stack.api_port, PATH, body, 200))  # warm
            for client, module in clients.items():
                contenders[f"{name} / {client}" if len(clients) > 1 else name] = (stack.api_port, module)
        runs = {name: {"p50": [], "rps": [], "p99": [], "cpu": []} for name in contenders}
        for r in range(args.alternate):
            order = list(contenders) if r % 2 == 0 else list(reversed(contenders))
            for name in order:
                port, load = contenders[name]
                runs[name]["p50"].append(statistics.median(
                    asyncio.run(load.sequential("127.0.0.1", port, PATH, body, 200))))
            for name in order:
                port, load = contenders[name]
                loop = asyncio.run(load.closed_loop("127.0.0.1", port, PATH, body, 32, args.seconds))
                for key, value in (("rps", loop["rps"]), ("p99", loop["p99_ms"]), ("cpu", loop["generator_cpu"])):
                    runs[name][key].append(value)
    first = next(iter(runs))
    ratio = lambda name, key: statistics.median(  # noqa: E731
        a / b for a, b in zip(runs[name][key], runs[first][key], strict=True))
    print(f"HTTP API, 16-token chat derender, 2 workers per stack, {args.alternate} alternating rounds; "
          f"x {first}: the median of the per-round ratios\n")
    print(f"| stack | idle p50 ms | x {first} | 32 connections req/s | x {first} | p99 ms under load | "
          "load client CPU |")
    print("|---|---|---|---|---|---|---|")
    for name, run in runs.items():
        median = {key: statistics.median(values) for key, values in run.items()}
        print(f"| {name} | {median['p50']:.2f} | {ratio(name, 'p50'):.2f} | {median['rps']:.0f} | "
              f"{ratio(name, 'rps'):.2f} | {median['p99']:.1f} | {median['cpu']:.0%} |")
    print("\nper round, idle p50 ms:", {n: [round(x, 2) for x in run["p50"]] for n, run in runs.items()})
    print("per round, req/s:", {n: [round(x) for x in run["rps"]] for n, run in runs.items()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seconds", type=float, help="per throughput measurement (default 5; 2 with --alternate)")
    ap.add_argument("--wire", default="2", help="the wire format to measure: 2 (v1 was removed in 0.2.0)")
    ap.add_argument("--min-replicas", type=int, default=0, help="DERENDER_MIN_REPLICAS (0: as before)")
    ap.add_argument("--replicas", type=int, help="replicas of the private Redis (default: --min-replicas)")
    ap.add_argument("--alternate", type=int, metavar="ROUNDS", help="stacks side by side, in alternating rounds")
    ap.add_argument("--stacks", default="0,1", help="--alternate: each stack's DERENDER_MIN_REPLICAS (and replicas)")
    ap.add_argument("--baseline", type=Path, help="--alternate: one more stack, on this checkout's code")
    ap.add_argument("--http-client", default="httpload", help="--alternate: httpload, httpx or both (comma-separated)")
    args = ap.parse_args()
    if args.wire != "2":
        ap.error("wire format v1 was removed in 0.2.0: only --wire 2 is left to measure")
    if not set(args.http_client.split(",")) <= set(HTTP_CLIENTS):
        ap.error("--http-client: httpload, httpx or httpload,httpx")
    body = body16()
    if args.alternate:
        args.seconds = args.seconds or 2.0
        alternate(body, args)
        return
    args.seconds = args.seconds or 5.0
    global DURABILITY
    DURABILITY = Durability.of(args.min_replicas, 1.0)
    local = in_process(body, args.n)
    runs = {int(w): measure(int(w), body, args) for w in args.wire.split(",")}
    replicas = args.min_replicas if args.replicas is None else args.replicas
    print(f"DERENDER_MIN_REPLICAS={args.min_replicas}, {replicas} replica(s)\n")
    for wire, run in runs.items():
        report(wire, run, local, args)
    if len(runs) == 2:
        compare(*runs.values(), *runs)


def measure(wire: int, body: bytes, args: argparse.Namespace) -> dict:
    """Everything for one wire format, on a stack of its own."""
    latency: dict[int, tuple[list[float], list[float]]] = {}
    costs: dict[str, PerJob] = {}
    replica_pids: list[int] = []
    with RedisProcess() as redis, contextlib.ExitStack() as replicas:
        for _ in range(args.min_replicas if args.replicas is None else args.replicas):
            replica = replicas.enter_context(RedisProcess(extra=("--replicaof", "127.0.0.1", str(redis.port))))
            wait_for(lambda replica=replica: role(replica.port)[3] == "connected", 30, "replica in sync")
            replica_pids.append(replica.proc.pid)
        env = {"DERENDER_MIN_REPLICAS": str(args.min_replicas)}
        stack = Stack(redis.url, "bench", workers=1, extra_env=env).start()
        admin = Redis.from_url(redis.url)
        try:
            port = stack.api_port
            for workers in (1, 2):
                if workers == 2:
                    stack.start_worker()
                    stack.wait_ready(2)
                asyncio.run(sequential("127.0.0.1", port, PATH, body, 100))  # warm
                idle = counted_idle(admin, 2.0)
                before = snapshot(admin)
                via_client = asyncio.run(client_sequential(redis.url, "bench", body, args.n))
                costs[f"Python client, {workers} worker(s)"] = per_job(snapshot(admin) - before, idle, args.n + 50)
                before = snapshot(admin)
                via_api = asyncio.run(sequential("127.0.0.1", port, PATH, body, args.n))
                costs[f"HTTP API, {workers} worker(s)"] = per_job(snapshot(admin) - before, idle, args.n)
                latency[workers] = (via_client, via_api)
            pids = [p.pid for p in stack.procs] + [redis.proc.pid, *replica_pids]
            cpu0, tree0, own0 = [cpu_seconds(p) for p in pids], tree_cpu_seconds(pids), time.process_time()
            t = time.perf_counter()
            jobs = int(args.seconds * 1000)
            thr_client = asyncio.run(client_throughput(redis.url, "bench", body, jobs))
            client_window = time.perf_counter() - t
            cpu1, tree1, own1 = [cpu_seconds(p) for p in pids], tree_cpu_seconds(pids), time.process_time()
            thr_client["cpu_us_per_job"] = (tree1 - tree0 + own1 - own0) / jobs * 1e6
            thr_api = asyncio.run(closed_loop("127.0.0.1", port, PATH, body, 32, args.seconds))
            cpu2, tree2 = [cpu_seconds(p) for p in pids], tree_cpu_seconds(pids)
            served = thr_api["rps"] * args.seconds
            generator = thr_api["generator_cpu"] * args.seconds
            thr_api["cpu_us_per_job"] = (tree2 - tree1 + generator) / served * 1e6 if served else float("nan")
        finally:
            stack.close()
    names = ["api", "worker-1", "worker-2", "redis"] + [f"replica-{i + 1}" for i in range(len(replica_pids))]
    return {"latency": latency, "costs": costs, "thr_client": thr_client, "thr_api": thr_api, "names": names,
            "cpu": (cpu0, cpu1, cpu2), "client_window": client_window}


def report(wire: int, run: dict, local: list[float], args: argparse.Namespace) -> None:
    names, (cpu0, cpu1, cpu2) = run["names"], run["cpu"]
    share = lambda a, b, w: ", ".join(f"{n} {(y - x) / w:.0%}" for n, x, y in zip(names, a, b, strict=False))  # noqa: E731
    p50 = statistics.median
    print(f"## wire format v{wire}\n")
    print(f"16-token chat derender, {args.n} sequential calls each (ms)\n")
    print("| path | p50 | p99 |")
    print("|---|---|---|")
    print(f"| in-process derender | {p50(local):.3f} | {pct(local, .99):.3f} |")
    for workers, (via_client, via_api) in run["latency"].items():
        plural = "s" * (workers > 1)
        print(f"| Python client ({workers} worker{plural}) | {p50(via_client):.2f} | {pct(via_client, .99):.2f} |")
        print(f"| HTTP API ({workers} worker{plural}) | {p50(via_api):.2f} | {pct(via_api, .99):.2f} |")
    for workers, (via_client, _) in run["latency"].items():
        print(f"\nqueue's added latency, {workers} worker(s) (client p50 - in-process p50): "
              f"{p50(via_client) - p50(local):.2f} ms")
    print("\nRedis per sequential job (INFO commandstats and total_reads_processed, idle rate subtracted):")
    for path, cost in run["costs"].items():
        print(f"- {path}: {cost.report()}")
    thr_client, thr_api = run["thr_client"], run["thr_api"]
    print("\nthroughput, small jobs, 2 workers:")
    print(f"- Python client, 64 in flight: {thr_client['jobs_per_s']:.0f} jobs/s, "
          f"{thr_client['cpu_us_per_job']:.0f} us CPU per job over every process "
          f"(client CPU {thr_client['client_cpu']:.0%}; {share(cpu0, cpu1, run['client_window'])})")
    print(f"- HTTP API, 32 connections: {thr_api['rps']:.0f} req/s, p50 {thr_api['p50_ms']:.1f} ms, "
          f"p99 {thr_api['p99_ms']:.1f} ms, errors {thr_api['errors']}, {thr_api['cpu_us_per_job']:.0f} us CPU "
          f"per request over every process (load generator CPU {thr_api['generator_cpu']:.0%}; "
          f"{share(cpu1, cpu2, args.seconds)})\n")


def compare(a: dict, b: dict, wire_a: int, wire_b: int) -> None:
    p50 = statistics.median
    rows = [
        ("client idle p50 (ms, 1 worker)", p50(a["latency"][1][0]), p50(b["latency"][1][0])),
        ("API idle p50 (ms, 1 worker)", p50(a["latency"][1][1]), p50(b["latency"][1][1])),
        ("client jobs/s (2 workers, 64 in flight)", a["thr_client"]["jobs_per_s"], b["thr_client"]["jobs_per_s"]),
        ("client CPU per job, all processes (us)", a["thr_client"]["cpu_us_per_job"],
         b["thr_client"]["cpu_us_per_job"]),
        ("API req/s (2 workers, 32 connections)", a["thr_api"]["rps"], b["thr_api"]["rps"]),
        ("API CPU per request, all processes (us)", a["thr_api"]["cpu_us_per_job"], b["thr_api"]["cpu_us_per_job"]),
        ("commands per client job", a["costs"]["Python client, 1 worker(s)"].commands,
         b["costs"]["Python client, 1 worker(s)"].commands),
        ("round trips per client job", a["costs"]["Python client, 1 worker(s)"].round_trips,
         b["costs"]["Python client, 1 worker(s)"].round_trips),
    ]
    print(f"## v{wire_b} against v{wire_a}, this run\n")
    print(f"| | v{wire_a} | v{wire_b} | v{wire_b}/v{wire_a} |")
    print("|---|---|---|---|")
    for name, x, y in rows:
        print(f"| {name} | {x:.2f} | {y:.2f} | {y / x:.2f}x |")


if __name__ == "__main__":
    main()
