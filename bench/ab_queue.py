"""The HTTP API path of two checkouts, and DERENDER_MIN_REPLICAS=1, timed in alternation.

    python bench/ab_queue.py --baseline ../other-checkout [--rounds 8]

Three stacks side by side, each a private redis-server, an API and two
workers: the baseline checkout's code (its processes run with PYTHONPATH set to
it), this checkout's with DERENDER_MIN_REPLICAS=0, and this checkout's with
DERENDER_MIN_REPLICAS=1 on a Redis with one replica. Idle stacks cost nothing
(their workers block in BRPOP), so the rounds alternate between them (order
reversed every other round) and a busy or drifting machine hits all three
alike. Per round and stack: the median of 200 sequential 16-token chat
derenders (bench/queue.py's body), then 32 keep-alive connections for 2 s.
Prints the medians over rounds, and each stack's per-round ratio to the
baseline (median): the number to compare when the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]  # bench/queue.py is not stdlib's
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
sys.path.append(str(ROOT / "bench"))

from httpload import closed_loop, sequential  # noqa: E402

from tests.helpers.redis_process import RedisProcess  # noqa: E402
from tests.helpers.sentinel_process import role, wait_for  # noqa: E402
from tests.helpers.stack import Stack  # noqa: E402

PATH = "/v1/chat/completions/derender"


def body16() -> bytes:
    """bench/queue.py's body (that file is named like the stdlib module, so it is loaded by path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_queue", ROOT / "bench" / "queue.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    body: bytes = module.body16()
    return body


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", required=True, help="a checkout of the code to compare with")
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    body = body16()
    servers = [RedisProcess().start() for _ in range(3)]
    replica = RedisProcess(extra=("--replicaof", "127.0.0.1", str(servers[2].port))).start()
    baseline = baseline_env(Path(args.baseline).resolve())
    stacks = {
        "baseline": Stack(servers[0].url, "ab", workers=2, extra_env=baseline),
        "min_replicas=0": Stack(servers[1].url, "ab", workers=2),
        "min_replicas=1": Stack(servers[2].url, "ab", workers=2, extra_env={"DERENDER_MIN_REPLICAS": "1"}),
    }
    latency: dict[str, list[float]] = {name: [] for name in stacks}
    rps: dict[str, list[float]] = {name: [] for name in stacks}
    try:
        wait_for(lambda: role(replica.port)[3] == "connected", 30, "replica in sync")
        for stack in stacks.values():
            stack.start()
            asyncio.run(sequential("127.0.0.1", stack.api_port, PATH, body, 200))  # warm
        for r in range(args.rounds):
            order = list(stacks) if r % 2 == 0 else list(reversed(stacks))
            for name in order:
                port = stacks[name].api_port
                latency[name].append(statistics.median(asyncio.run(sequential("127.0.0.1", port, PATH, body, 200))))
            for name in order:
                port = stacks[name].api_port
                rps[name].append(asyncio.run(closed_loop("127.0.0.1", port, PATH, body, 32, 2.0))["rps"])
    finally:
        for stack in stacks.values():
            stack.close()
        replica.close()
        for server in servers:
            server.close()
    print(f"HTTP API, 16-token chat derender, 2 workers, {args.rounds} alternating rounds\n")
    print("| stack | idle p50 ms (median of rounds) | x baseline (median of rounds) | "
          "32 connections req/s | x baseline |")
    print("|---|---|---|---|---|")
    for name in stacks:
        ratio_l = statistics.median(a / b for a, b in zip(latency[name], latency["baseline"], strict=True))
        ratio_t = statistics.median(a / b for a, b in zip(rps[name], rps["baseline"], strict=True))
        print(f"| {name} | {statistics.median(latency[name]):.2f} | {ratio_l:.2f} | "
              f"{statistics.median(rps[name]):.0f} | {ratio_t:.2f} |")
    print("\nper round, idle p50 ms:", {n: [round(x, 2) for x in v] for n, v in latency.items()})
    print("per round, req/s:", {n: [round(x) for x in v] for n, v in rps.items()})


if __name__ == "__main__":
    main()
