"""vLLM's responsiveness experiment (PR 49396), against our stack.

    python bench/probe.py [--seconds 10] [--sizes 500,1000,2000,4000] [--png bench/probe.png]
                          [--variant NAME=CHECKOUT[,VAR=VALUE...] ...]

A private redis-server, the API and ONE `derender worker` (light jobs on a
thread of their own, heavy ones in one forked, niced child process), and one
more stack per `--variant NAME=CHECKOUT[,VAR=VALUE...]`: that checkout's code
(PYTHONPATH) with those settings, for example an older checkout's removed
ways to run the CPU work (before 0.3.0: `DERENDER_INLINE_CPU=1` on the loop,
`DERENDER_HEAVY_EXECUTOR=thread` on threads; bench/results/probe.txt).
Per point, for `--seconds`:
4 clients loop heavy derenders (N tokens, top-5 logprobs; plus a top-20
point at the largest size), a `/health` probe every 10 ms, and a 16-token
derender every 50 ms. Reports the API probe, the light job's round trip, the
heavy average, and the worker's own event-loop lag (from its Prometheus
histogram `derender_worker_event_loop_lag_seconds`, interpolated as
`histogram_quantile` does). Prints vLLM's table layout plus our columns and
writes a PNG plot.

    python bench/probe.py --tails [--seconds 20] [--rounds 4] [--baseline [NAME=]CHECKOUT ...]

The tail experiment (issue 15): the same load (4 heavy clients, 4000 tokens
top-5 by default; a 16-token derender every 50 ms; `/health` every 10 ms), each
in a load-generator process of its own on httpx (bench/httpx_load.py), against
the default stack. Reports p50/p99/p99.9/max and counts of the 16-token
request and `/health`, pooled over rounds, the median of the rounds' p99, the
API's and the worker's event-loop lag, and the worst 16-token samples with
what `/health` saw around them. Each `--baseline` adds a stack running that
checkout's code (PYTHONPATH), and the rounds alternate between the stacks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT)]
sys.path += [str(ROOT / "tests"), str(ROOT / "bench")]

from bodies import BodyMaker  # noqa: E402
from httpload import Connection  # noqa: E402

from derender_queue.core import ModelRegistry, read_models_config  # noqa: E402
from tests.helpers.redis_process import RedisProcess  # noqa: E402
from tests.helpers.stack import Stack  # noqa: E402

CHAT = "/v1/chat/completions/derender"
LAG = "derender_worker_event_loop_lag_seconds_bucket"
API_LAG = "derender_api_event_loop_lag_seconds_bucket"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(int(len(values) * q), len(values) - 1)] if values else float("nan")


def lag_buckets(port: int, name: str = LAG) -> dict[float, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out[float("inf") if le == "+Inf" else float(le)] = float(line.rsplit(" ", 1)[1])
    return out


def histogram_quantile(q: float, before: dict[float, float], after: dict[float, float]) -> float:
    """Prometheus' histogram_quantile over the counts between two scrapes."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1]
    if total <= 0:
        return float("nan")
    rank, lower, prev = q * total, 0.0, 0.0
    for bound, count in zip(bounds, counts, strict=False):
        if count >= rank:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * (rank - prev) / max(count - prev, 1e-12)
        lower, prev = bound, count
    return lower


async def point(port: int, heavy: bytes, light: bytes, seconds: float) -> dict:
    stop_at = time.perf_counter() + seconds
    heavy_ms, probe_ms, light_ms = [], [], []

    async def heavy_client() -> None:
        conn = await Connection.open("127.0.0.1", port)
        while time.perf_counter() < stop_at:
            t = time.perf_counter()
            status, _ = await conn.request("POST", CHAT, heavy)
            assert status == 200, status
            heavy_ms.append((time.perf_counter() - t) * 1000)
        await conn.close()

    async def every(interval: float, method: str, path: str, body: bytes, out: list[float]) -> None:
        conn = await Connection.open("127.0.0.1", port)
        next_at = time.perf_counter()
        while time.perf_counter() < stop_at:
            t = time.perf_counter()
            status, _ = await conn.request(method, path, body)
            assert status == 200, status
            out.append((time.perf_counter() - t) * 1000)
            next_at += interval
            await asyncio.sleep(max(next_at - time.perf_counter(), 0))
        await conn.close()

    await asyncio.gather(*(heavy_client() for _ in range(4)), every(0.010, "GET", "/health", b"", probe_ms),
                         every(0.050, "POST", CHAT, light, light_ms))
    return {"heavy_avg": statistics.mean(heavy_ms), "probe_p50": pct(probe_ms, .5), "probe_p99": pct(probe_ms, .99),
            "light_p50": pct(light_ms, .5), "light_p99": pct(light_ms, .99), "heavy_n": len(heavy_ms)}


def variant_env(spec: str) -> tuple[str, dict[str, str]]:
    """`NAME=CHECKOUT[,VAR=VALUE...]` -> the name and its stack's environment."""
    name, _, rest = spec.partition("=")
    checkout, *pairs = rest.split(",")
    # -m puts the working directory first on the path: PYTHONSAFEPATH keeps it off
    env = {"PYTHONPATH": str(Path(checkout).resolve()), "PYTHONSAFEPATH": "1"}
    return name, env | dict(pair.split("=", 1) for pair in pairs)


def run_mode(mode: str, env: dict[str, str], cases: list[tuple[str, bytes]], light: bytes,
             seconds: float) -> dict[str, dict]:
    results = {}
    with RedisProcess() as redis:
        stack = Stack(redis.url, "probe", workers=1, extra_env=env).start()
        try:
            metrics_port = stack.metrics_ports[0]
            asyncio.run(point(stack.api_port, cases[0][1], light, 1.0))  # warm-up
            for name, heavy in cases:
                before = lag_buckets(metrics_port)
                row = asyncio.run(point(stack.api_port, heavy, light, seconds))
                after = lag_buckets(metrics_port)
                row["lag_p50"] = histogram_quantile(0.5, before, after) * 1000
                row["lag_p99"] = histogram_quantile(0.99, before, after) * 1000
                results[name] = row
                print(f"  {mode} {name}: {row}", file=sys.stderr, flush=True)
        finally:
            stack.close()
    return results


def plot(path: Path, sizes: list[int], modes: dict[str, dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, key, title in zip(axes, ("probe_p99", "light_p99", "lag_p99"),
                              ("API /health probe p99", "16-token derender p99", "worker event-loop lag p99"),
                              strict=False):
        for label, data in modes.items():
            ax.plot(sizes, [data[f"{n} top-5"][key] for n in sizes], "s-" if label == "this" else "o--", label=label)
        ax.set_title(title)
        ax.set_xlabel("heavy request tokens (top-5 logprobs, 4 clients)")
        ax.set_ylabel("ms")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def load_processes(url: str, files: dict[str, Path], seconds: float) -> dict[str, dict]:
    """The three generators, each its own process, started on one clock."""
    start_at = time.time() + 2.0  # their imports and connections come first
    script = str(ROOT / "bench" / "httpx_load.py")
    clock = ["--start-at", str(start_at), "--stop-at", str(start_at + seconds)]
    roles = {"heavy": [url + CHAT, str(files["heavy"]), "--clients", "4"],
             "light": [url + CHAT, str(files["light"]), "--every", "0.05"],
             "health": [url + "/health", "-", "--every", "0.01"]}
    # -P: bench/ is not put first on the path (its queue.py would shadow the stdlib module)
    procs = {role: subprocess.Popen([sys.executable, "-P", script, *argv, *clock], stdout=subprocess.PIPE)
             for role, argv in roles.items()}
    out = {}
    for role, proc in procs.items():
        stdout, _ = proc.communicate()
        assert proc.returncode == 0, (role, proc.returncode)
        out[role] = json.loads(stdout)
    return out


def tail_stats(ms: list[float]) -> dict[str, float]:
    return {"n": len(ms), "p50": pct(ms, .5), "p99": pct(ms, .99), "p999": pct(ms, .999),
            "max": max(ms) if ms else float("nan")}


def tail_round(stack: Stack, files: dict[str, Path], seconds: float) -> dict:
    worker_before = lag_buckets(stack.metrics_ports[0])
    api_before = lag_buckets(stack.api_port, API_LAG)
    cpu0 = _tree_cpu(stack)
    load = load_processes(stack.url, files, seconds)
    cpu = _tree_cpu(stack) - cpu0
    worker_after = lag_buckets(stack.metrics_ports[0])
    api_after = lag_buckets(stack.api_port, API_LAG)
    for role, data in load.items():
        bad = [s for s in data["samples"] if s[2] != 200]
        assert not bad, (role, bad[:3])
    api_lag = {f"api_lag_{n}": histogram_quantile(q, api_before, api_after) * 1000
               for n, q in (("p99", .99), ("p999", .999))} if api_after else {}
    return {**load, **api_lag, "api_stalls_50ms": _over(api_before, api_after, 0.05),
            "worker_lag_p99": histogram_quantile(.99, worker_before, worker_after) * 1000,
            "worker_stalls_50ms": _over(worker_before, worker_after, 0.05), "server_cpu_s": cpu}


def _over(before: dict[float, float], after: dict[float, float], bound: float) -> float:
    """Samples of a histogram above `bound` (one of its buckets) between two scrapes."""
    if not after:
        return float("nan")
    total = after[float("inf")] - before.get(float("inf"), 0.0)
    return total - (after[bound] - before.get(bound, 0.0))


def _tree_cpu(stack: Stack) -> float:
    """CPU seconds of the stack's processes and their descendants (the heavy child), from /proc."""
    stats = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(stat.parent.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
    pids, total = {p.pid for p in stack.procs}, 0.0
    while pids:
        total += sum(stats[p][1] for p in pids if p in stats)
        pids = {child for child, (parent, _) in stats.items() if parent in pids}
    return total


def worst_light(light: list, health: list, n: int = 5) -> list[str]:
    """The worst 16-token samples, each with the slowest `/health` started in its span."""
    lines = []
    t0 = min(s[0] for s in light)
    for started, ms, _ in sorted(light, key=lambda s: -s[1])[:n]:
        around = [h[1] for h in health if started - 0.01 <= h[0] <= started + ms / 1000]
        lines.append(f"t={started - t0:6.2f}s {ms:7.1f} ms; /health in that span: {len(around)} sent, "
                     f"slowest {max(around, default=float('nan')):.1f} ms")
    return lines


def run_tails(args: argparse.Namespace, maker: BodyMaker) -> None:
    env = dict(kv.split("=", 1) for kv in args.env)
    variants: dict[str, dict[str, str]] = {}
    for checkout in args.baseline:  # -m puts the working directory first on the path: PYTHONSAFEPATH keeps it off
        name, _, path = checkout.rpartition("=")
        variants[name or Path(path).name] = {**env, "PYTHONPATH": str(Path(path).resolve()), "PYTHONSAFEPATH": "1"}
    variants["this"] = env
    with tempfile.TemporaryDirectory() as tmp:
        files = {"heavy": Path(tmp, "heavy.json"), "light": Path(tmp, "light.json")}
        files["heavy"].write_bytes(maker.chat(args.tokens, 5))
        files["light"].write_bytes(maker.chat(16, 0))
        servers = {name: RedisProcess().start() for name in variants}
        stacks = {name: Stack(servers[name].url, "tails", workers=1, extra_env=env).start()
                  for name, env in variants.items()}
        rounds: dict[str, list[dict]] = {name: [] for name in variants}
        try:
            for stack in stacks.values():
                load_processes(stack.url, files, 2.0)  # warm-up
            for r in range(args.rounds):
                order = list(stacks) if r % 2 == 0 else list(reversed(stacks))
                for name in order:
                    row = tail_round(stacks[name], files, args.seconds)
                    rounds[name].append(row)
                    print(f"  round {r} {name}: 16-token {tail_stats([s[1] for s in row['light']['samples']])} "
                          f"/health {tail_stats([s[1] for s in row['health']['samples']])} "
                          f"api stalls>50ms {row['api_stalls_50ms']} worker stalls>50ms "
                          f"{row['worker_stalls_50ms']}", file=sys.stderr, flush=True)
        finally:
            for stack in stacks.values():
                stack.close()
            for server in servers.values():
                server.close()
    print_tails(args, rounds)


def print_tails(args: argparse.Namespace, rounds: dict[str, list[dict]]) -> None:
    print(f"\n{args.rounds} rounds x {args.seconds:g} s per stack; 4 heavy clients ({args.tokens} tokens, top-5), "
          "16-token every 50 ms, /health every 10 ms; each in its own httpx process\n")
    print("| stack | request | n | p50 ms | p99 ms | p99.9 ms | max ms | median of rounds' p99 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for name, rows in rounds.items():
        for role, label in (("light", "16-token"), ("health", "/health")):
            pooled = tail_stats([s[1] for row in rows for s in row[role]["samples"]])
            per_round = statistics.median(tail_stats([s[1] for s in row[role]["samples"]])["p99"] for row in rows)
            print(f"| {name} | {label} | {pooled['n']} | {pooled['p50']:.1f} | {pooled['p99']:.1f} "
                  f"| {pooled['p999']:.1f} | {pooled['max']:.1f} | {per_round:.1f} |")
    print("\n| stack | heavy req/s | API loop lag p99 / p99.9 ms (median of rounds) | API stalls > 50 ms "
          "| worker loop lag p99 ms | worker stalls > 50 ms | server CPU s per round | generators CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, rows in rounds.items():
        heavy = statistics.median(len(row["heavy"]["samples"]) / args.seconds for row in rows)
        lag99 = statistics.median(row.get("api_lag_p99", float("nan")) for row in rows)
        lag999 = statistics.median(row.get("api_lag_p999", float("nan")) for row in rows)
        gen = statistics.median(sum(row[r]["cpu_s"] for r in ("heavy", "light", "health")) for row in rows)
        print(f"| {name} | {heavy:.1f} | {lag99:.1f} / {lag999:.1f} | {sum(row['api_stalls_50ms'] for row in rows):g} "
              f"| {statistics.median(row['worker_lag_p99'] for row in rows):.1f} "
              f"| {sum(row['worker_stalls_50ms'] for row in rows):g} "
              f"| {statistics.median(row['server_cpu_s'] for row in rows):.1f} | {gen:.1f} |")
    for name, rows in rounds.items():
        print(f"\nworst 16-token samples, {name}:")
        for r, row in enumerate(rows):
            for line in worst_light(row["light"]["samples"], row["health"]["samples"], 2):
                print(f"  round {r} {line}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=None, help="per point (10), per round with --tails (20)")
    ap.add_argument("--sizes", default="500,1000,2000,4000")
    ap.add_argument("--png", type=Path, default=ROOT / "bench" / "probe.png")
    ap.add_argument("--tails", action="store_true", help="the tail experiment on httpx load processes")
    ap.add_argument("--rounds", type=int, default=4, help="--tails: rounds per stack")
    ap.add_argument("--tokens", type=int, default=4000, help="--tails: tokens per heavy request")
    ap.add_argument("--baseline", action="append", default=[], metavar="[NAME=]CHECKOUT",
                    help="--tails: a checkout to compare with, rounds alternating (repeatable)")
    ap.add_argument("--env", action="append", default=[], help="--tails: NAME=VALUE for every stack's processes")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=CHECKOUT[,VAR=VALUE...]",
                    help="another stack: that checkout's code with those settings (repeatable)")
    args = ap.parse_args()
    maker = BodyMaker(ModelRegistry(read_models_config(None), preload=False).get(None).vocab.tokenizer)
    if args.tails:
        args.seconds = args.seconds or 20.0
        run_tails(args, maker)
        return
    args.seconds = args.seconds or 10.0
    sizes = [int(s) for s in args.sizes.split(",")]
    cases = [(f"{n} top-5", maker.chat(n, 5)) for n in sizes] + [(f"{sizes[-1]} top-20", maker.chat(sizes[-1], 20))]
    light = maker.chat(16, 0)
    modes = {name: run_mode(name, env, cases, light, args.seconds)
             for name, env in [variant_env(v) for v in args.variant] + [("this", {})]}
    print("\n| stack | tokens | probe p50 / p99 ms | heavy avg ms | 16-token p50 / p99 ms | loop lag p50 / p99 ms |")
    print("|---|---|---|---|---|---|")
    for mode, rows in modes.items():
        for name, _ in cases:
            r = rows[name]
            print(f"| {mode} | {name} | {r['probe_p50']:.1f} / {r['probe_p99']:.1f} | {r['heavy_avg']:.0f} "
                  f"| {r['light_p50']:.1f} / {r['light_p99']:.1f} | {r['lag_p50']:.1f} / {r['lag_p99']:.1f} |")
    try:
        plot(args.png, sizes, modes)
    except ImportError:  # matplotlib is not a dependency: the tables above are the figures
        print("\nno plot: matplotlib is not installed")
    else:
        print(f"\nplot: {args.png}")


if __name__ == "__main__":
    main()
