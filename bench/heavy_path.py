"""A heavy job end to end against the in-process core, on the same bodies, in one run.

    python bench/heavy_path.py [--reps 9] [--tokens 4000]

For top-5 and top-20 logprobs, `--reps` fresh chat bodies of `--tokens`
tokens (bench/bodies.py): the in-process derender (`Derenderer.derender`,
what bench/core.py times), then each body once through the Python client and
once through the HTTP API (one keep-alive connection), one request at a time,
against a private redis-server and one default `derender worker` (heavy jobs
in a forked child). Medians of wall time, the ratio to the core, and the
bytes each way; then, for the API pass, CPU ms per request in each process
(the client, the API, the worker's own loop, its heavy child, Redis) beside
the core's CPU on the same bodies: where the time beyond the core goes. The
API pass times the core again on each body just before sending it, and its
ratio is to that time (the machine's speed drifts within minutes).

    python bench/heavy_path.py --reps 20 --baseline CHECKOUT [--no-client]

adds a second stack (its own redis-server) running CHECKOUT's code, and the
API pass alternates between the two stacks body by body (the order swapped
each time), so both rows see the same machine speed: this machine kind's
speed drifts within minutes. `--no-client` skips the Python client pass.

    python bench/heavy_path.py --reps 20 --no-client --baseline . --redis-malloc-conf muzzy_decay_ms:-1

runs this stack's redis-server with that jemalloc setting (MALLOC_CONF and
JE_MALLOC_CONF, as docker-compose.yml's redis): with `--baseline .` the same
code on a Redis with jemalloc's defaults, alternated. The CPU table also gives
the minor page faults per request of the API, the worker's loop, its heavy
child and Redis (a fresh page costs ~2 us here, so they show which process
allocates afresh what it could reuse).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# bench/queue.py is named like the stdlib `queue` (which redis imports): keep
# this folder off the front of sys.path and look there last.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT)]
sys.path += [str(ROOT / "tests"), str(ROOT / "bench")]

from bodies import BodyMaker  # noqa: E402
from httpload import Connection  # noqa: E402
from measure import cpu_seconds, process_tree_cpu, process_tree_faults, stat_fields  # noqa: E402

from derender_queue.core import Derenderer, ModelRegistry, read_models_config  # noqa: E402
from derender_queue.wire.client import DerenderClient  # noqa: E402
from tests.helpers.redis_process import RedisProcess  # noqa: E402
from tests.helpers.stack import Stack  # noqa: E402

PATH = "/v1/chat/completions/derender"


def core_ms(derenderer: Derenderer, bodies: list[bytes]) -> tuple[list[float], int, float]:
    """Wall ms per body, the response size, and CPU ms per body."""
    out, size = [], 0
    c = time.process_time()
    for body in bodies:
        t = time.perf_counter()
        size = len(derenderer.derender("chat", body).body)
        out.append((time.perf_counter() - t) * 1000)
    return out, size, (time.process_time() - c) * 1000 / len(bodies)


class CpuSplit:
    """CPU ms per request of each process on the API path."""

    NAMES = ("client", "API", "worker loop", "heavy child", "Redis")

    def __init__(self, api: int, worker: int, redis: int) -> None:
        self.pids = (api, worker, redis)

    def faults(self) -> tuple[int, ...]:
        """Minor page faults so far of the API, the worker loop, its heavy child and Redis."""
        api, worker, redis = self.pids
        own = int(stat_fields(worker)[7])
        return (int(stat_fields(api)[7]), own, process_tree_faults(worker) - own, int(stat_fields(redis)[7]))

    def read(self) -> tuple[float, ...]:
        api, worker, redis = self.pids
        own = cpu_seconds(worker)
        return (time.process_time(), cpu_seconds(api), own, process_tree_cpu(worker) - own, cpu_seconds(redis))

    @staticmethod
    def per_request(before: tuple[float, ...], after: tuple[float, ...], n: int) -> list[float]:
        return [(b - a) * 1000 / n for a, b in zip(before, after, strict=True)]


async def client_ms(url: str, bodies: list[bytes]) -> list[float]:
    async with DerenderClient(url, key_prefix="bench") as client:
        await client.derender_chat(bodies[0], timeout=60)
        out = []
        for body in bodies:
            t = time.perf_counter()
            await client.derender_chat(body, timeout=60)
            out.append((time.perf_counter() - t) * 1000)
        return out


Timed = tuple[list[float], list[float], list[float]]
"""Wall ms per body, CPU ms per request by process, page faults per request by process (`CpuSplit.faults`)."""


async def api_ms(ports: list[int], bodies: list[bytes], splits: list[CpuSplit],
                 derenderer: Derenderer) -> tuple[list[Timed], list[float], float]:
    """Per stack: wall ms per body, CPU ms and page faults per request by
    process; and the core's wall ms on each body, timed just
    before the body's requests (the machine's speed drifts, so the core is
    timed among them), and its CPU ms per body. With several stacks, each
    body goes to each in turn, starting with a different one. The client's
    CPU leaves out the core's."""
    conns = [await Connection.open("127.0.0.1", port) for port in ports]
    try:
        for conn in conns:
            await conn.request("POST", PATH, bodies[0])
        walls: list[list[float]] = [[] for _ in conns]
        core, core_cpu = [], 0.0
        before = [split.read() for split in splits]
        faults = [split.faults() for split in splits]
        for i, body in enumerate(bodies):
            t, c = time.perf_counter(), time.process_time()
            derenderer.derender("chat", body)
            core.append((time.perf_counter() - t) * 1000)
            core_cpu += time.process_time() - c
            for j in ((i + k) % len(conns) for k in range(len(conns))):
                t = time.perf_counter()
                status, _ = await conns[j].request("POST", PATH, body)
                walls[j].append((time.perf_counter() - t) * 1000)
                assert status == 200, status
        timed = []
        for wall, split, b, f in zip(walls, splits, before, faults, strict=True):
            cpu = split.per_request(b, split.read(), len(bodies))
            cpu[0] -= core_cpu * 1000 / len(bodies)
            faulted = [(end - start) / len(bodies) for start, end in zip(f, split.faults(), strict=True)]
            timed.append((wall, cpu, faulted))
        return timed, core, core_cpu * 1000 / len(bodies)
    finally:
        for conn in conns:
            await conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--tokens", type=int, default=4000)
    ap.add_argument("--baseline", metavar="CHECKOUT", help="alternate the API pass with this checkout's code")
    ap.add_argument("--no-client", action="store_true", help="skip the Python client pass")
    ap.add_argument("--redis-malloc-conf", metavar="CONF", help="jemalloc setting for this stack's redis-server")
    args = ap.parse_args()
    registry = ModelRegistry(read_models_config(None))
    derenderer, maker = Derenderer(registry), BodyMaker(registry.get(None).vocab.tokenizer)
    cases = {k: [maker.chat(args.tokens, k) for _ in range(args.reps)] for k in (5, 20)}
    core = {k: core_ms(derenderer, bodies) for k, bodies in cases.items()}
    conf = args.redis_malloc_conf
    names = [f"this (Redis {conf})" if conf else "this"] + ([Path(args.baseline).name or args.baseline]
                                                            if args.baseline else [])
    envs: list[dict[str, str]] = [{}]
    if args.baseline:  # -m puts the working directory first on the path: PYTHONSAFEPATH keeps it off
        envs.append({"PYTHONPATH": str(Path(args.baseline).resolve()), "PYTHONSAFEPATH": "1"})
    with contextlib.ExitStack() as stack:
        allocator = {"MALLOC_CONF": conf, "JE_MALLOC_CONF": conf} if conf else None
        redises = [stack.enter_context(RedisProcess(env=allocator if i == 0 else None)) for i in range(len(envs))]
        stacks = [Stack(r.url, "bench", workers=1, extra_env=env) for r, env in zip(redises, envs, strict=True)]
        try:
            for s in stacks:
                s.start()
            via_client = {} if args.no_client else {
                k: asyncio.run(client_ms(redises[0].url, bodies)) for k, bodies in cases.items()}
            splits = [CpuSplit(s.procs[0].pid, s.worker_procs[0].pid, r.proc.pid)
                      for s, r in zip(stacks, redises, strict=True)]
            ports = [s.api_port for s in stacks]
            via_api = {k: asyncio.run(api_ms(ports, bodies, splits, derenderer)) for k, bodies in cases.items()}
        finally:
            for s in stacks:
                s.close()
    report(args, cases, core, via_client, via_api, names)


def report(args: argparse.Namespace, cases: dict[int, list[bytes]], core: dict[int, tuple[list[float], int, float]],
           via_client: dict[int, list[float]], via_api: dict[int, tuple[list[Timed], list[float], float]],
           names: list[str]) -> None:
    p50 = statistics.median
    print(f"{args.tokens}-token chat derender, {args.reps} fresh bodies per row, one at a time; medians (ms)\n")
    print("| logprobs | stack | body KiB | response KiB | core | Python client | x core | core among the API's "
          "requests | HTTP API | x that core |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k, bodies in cases.items():
        c, size, _ = core[k]
        timed, among, _ = via_api[k]
        for name, (walls, _, _) in zip(names, timed, strict=True):
            cl = "- | -"
            if k in via_client and name == "this":
                cl = f"{p50(via_client[k]):.1f} | {p50(via_client[k]) / p50(c):.2f}x"
            print(f"| top-{k} | {name} | {len(bodies[0]) / 1024:,.0f} | {size / 1024:,.0f} | {p50(c):.1f} | {cl} | "
                  f"{p50(among):.1f} | {p50(walls):.1f} | {p50(walls) / p50(among):.2f}x |")
    print("\nCPU ms per request on the HTTP API path (mean over the bodies), beside the core's CPU per body "
          "(timed among the requests)\n")
    print("| logprobs | stack | core | " + " | ".join(CpuSplit.NAMES) + " | all | all / core | page faults: "
          + ", ".join(CpuSplit.NAMES[1:]) + " |")
    print("|---|---|---|" + "---|" * len(CpuSplit.NAMES) + "---|---|---|")
    for k in cases:
        timed, _, core_cpu = via_api[k]
        for name, (_, cpu, faults) in zip(names, timed, strict=True):
            print(f"| top-{k} | {name} | {core_cpu:.1f} | " + " | ".join(f"{v:.1f}" for v in cpu)
                  + f" | {sum(cpu):.1f} | {sum(cpu) / core_cpu:.2f}x | "
                  + ", ".join(f"{f:,.0f}" for f in faults) + " |")


if __name__ == "__main__":
    main()
