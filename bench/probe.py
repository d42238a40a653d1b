"""vLLM's responsiveness experiment (PR 49396), against our stack.

    python bench/probe.py [--seconds 10] [--sizes 500,1000,2000,4000] [--png bench/probe.png]

A private redis-server, the API and ONE `derender worker`, in three modes:
the CPU work inline on the worker's event loop ("base", DERENDER_INLINE_CPU=1);
the default ("fix": light jobs on a thread of their own, heavy ones in one
forked, niced child process, DERENDER_HEAVY_EXECUTOR=process); and heavy jobs
on two threads of the worker process ("threads", DERENDER_HEAVY_EXECUTOR=thread).
Per point, for `--seconds`:
4 clients loop heavy derenders (N tokens, top-5 logprobs; plus a top-20
point at the largest size), a `/health` probe every 10 ms, and a 16-token
derender every 50 ms. Reports the API probe, the light job's round trip, the
heavy average, and the worker's own event-loop lag (from its Prometheus
histogram `derender_worker_event_loop_lag_seconds`, interpolated as
`histogram_quantile` does). Prints vLLM's table layout plus our columns and
writes a PNG plot.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT)]
sys.path += [str(ROOT / "tests"), str(ROOT / "bench")]

from bodies import BodyMaker  # noqa: E402
from httpload import Connection  # noqa: E402
from redis_process import RedisProcess  # noqa: E402
from stack import Stack  # noqa: E402

from derender_queue.core import ModelRegistry, read_models_config  # noqa: E402

CHAT = "/v1/chat/completions/derender"
LAG = "derender_worker_event_loop_lag_seconds_bucket"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(int(len(values) * q), len(values) - 1)] if values else float("nan")


def lag_buckets(port: int) -> dict[float, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith(LAG + "{"):
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


MODES = {
    "base": {"DERENDER_INLINE_CPU": "1"},
    "fix": {},
    "threads": {"DERENDER_HEAVY_EXECUTOR": "thread", "DERENDER_HEAVY_WORKERS": "2"},
}


def run_mode(mode: str, cases: list[tuple[str, bytes]], light: bytes, seconds: float) -> dict[str, dict]:
    results = {}
    with RedisProcess() as redis:
        stack = Stack(redis.url, "probe", workers=1, extra_env=MODES[mode]).start()
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


def plot(path: Path, sizes: list[int], base: dict, fix: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, key, title in zip(axes, ("probe_p99", "light_p99", "lag_p99"),
                              ("API /health probe p99", "16-token derender p99", "worker event-loop lag p99"),
                              strict=False):
        for label, data, style in (("inline on the loop (base)", base, "o--"), ("default (fix)", fix, "s-")):
            ax.plot(sizes, [data[f"{n} top-5"][key] for n in sizes], style, label=label)
        ax.set_title(title)
        ax.set_xlabel("heavy request tokens (top-5 logprobs, 4 clients)")
        ax.set_ylabel("ms")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--sizes", default="500,1000,2000,4000")
    ap.add_argument("--png", type=Path, default=ROOT / "bench" / "probe.png")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    maker = BodyMaker(ModelRegistry(read_models_config(None), preload=False).get(None).vocab.tokenizer)
    cases = [(f"{n} top-5", maker.chat(n, 5)) for n in sizes] + [(f"{sizes[-1]} top-20", maker.chat(sizes[-1], 20))]
    light = maker.chat(16, 0)
    base = run_mode("base", cases, light, args.seconds)
    fix = run_mode("fix", cases, light, args.seconds)
    threads = run_mode("threads", cases, light, args.seconds)
    print("\n| tokens | probe p50 ms base -> fix | probe p99 ms base -> fix | heavy avg ms base / fix "
          "| 16-token p50 ms base -> fix | 16-token p99 ms base -> fix | loop lag p50 ms base -> fix "
          "| loop lag p99 ms base -> fix |")
    print("|---|---|---|---|---|---|---|---|")
    for name, _ in cases:
        b, f = base[name], fix[name]
        print(f"| {name} | {b['probe_p50']:.1f} -> {f['probe_p50']:.1f} | {b['probe_p99']:.1f} -> {f['probe_p99']:.1f} "
              f"| {b['heavy_avg']:.0f} / {f['heavy_avg']:.0f} | {b['light_p50']:.1f} -> {f['light_p50']:.1f} "
              f"| {b['light_p99']:.1f} -> {f['light_p99']:.1f} | {b['lag_p50']:.1f} -> {f['lag_p50']:.1f} "
              f"| {b['lag_p99']:.1f} -> {f['lag_p99']:.1f} |")
    print("\nheavy jobs on two worker threads instead (DERENDER_HEAVY_EXECUTOR=thread):\n")
    print("| tokens | probe p99 ms | heavy avg ms | 16-token p99 ms | loop lag p99 ms |")
    print("|---|---|---|---|---|")
    for name, _ in cases:
        t = threads[name]
        print(f"| {name} | {t['probe_p99']:.1f} | {t['heavy_avg']:.0f} | {t['light_p99']:.1f} | {t['lag_p99']:.1f} |")
    plot(args.png, sizes, base, fix)
    print(f"\nplot: {args.png}")


if __name__ == "__main__":
    main()
