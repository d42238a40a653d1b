"""Engine-step jobs beside per-chunk jobs: streams x 1 token through Redis to
one real `derender worker` process.

    python bench/step.py [--streams 64 256] [--seconds 5] [--groups 1 2] [--reps 30] [--heavy-workers 1] [--no-local]

In process first: CPU us per item of `Derenderer.derender("step", ...)`
against one `derender("chat", ...)` call per chunk, on the same bodies (the
derender alone, no queue; median of `--reps` steps).

Then, for each stream count (64, 256) and each kind (no logprobs; top-5 logprobs),
both paths carry the same 1-token chunks of N running streams, each chunk
with the state the stream's previous chunk returned:

* step: one `step` job per engine step (all N streams' chunks);
* per-chunk: one job per stream per step (N jobs in flight, gathered).

Two measurements per row:

* saturation: G independent sets of N streams (G engines; one engine's
  steps follow each other), each stepping as fast as its answers come back,
  so G steps in flight, for `--seconds`, for each G of `--groups`: stream
  chunks/s, and CPU us per chunk of the worker process tree, the producer
  (this process) and Redis;
* driven: one set of N streams stepped every 20 ms (50 steps/s, open loop:
  a step starts at its tick, or when the previous one returned if later),
  for `--seconds`: step latency p50/p99 to the last chunk's answer, from the
  tick and from the step's start (when this script woke for the tick, whose
  timer runs late; or the tick, if the step before ran past it).

The producer splices each state into the next body as bytes (no JSON
parsing of items), as a generate stage in Python would do it cheaply.

    python bench/step.py --gaps [--streams 256] [--steps 300] [--gap-ms 15]

How steady one step's derender is on this machine, in process, no queue:
the same N-stream step (no logprobs; top-5) derendered back to back, with
idle gaps between steps (as at 50 steps/s), and with gaps while another
process keeps the other core busy; each step timed alone (wall ms; building
the body and splicing the states are outside the timing). Prints p50 / p90 /
p99 / max per mode, and per mode the longest run of consecutive steps more
than 1 ms over that mode's median: a slow phase of the machine shows as a
run, a one-off stall as a single step.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# bench/queue.py shadows the stdlib `queue` (which redis imports): keep
# bench/ off the front of sys.path and look there last.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT)]
sys.path += [str(ROOT / "tests"), str(ROOT / "bench")]

import msgspec  # noqa: E402
from bodies import BodyMaker  # noqa: E402
from measure import cpu_seconds, pct, process_tree_cpu  # noqa: E402  (cpu_seconds: the worker's loop alone, without its heavy child)

from derender_queue.core import ModelRegistry, read_models_config  # noqa: E402

TICK_S = 0.02
SEP = b',"stream_state":'


class _Results(msgspec.Struct):
    results: list[msgspec.Raw]


_results = msgspec.json.Decoder(_Results)


class Streams:
    """N running requests: each one's next 1-token chunk body, with its state."""

    def __init__(self, maker: BodyMaker, n: int, k: int, tag: str) -> None:
        self.k = k
        self.ids = maker._slice(4096)
        self.logprobs = maker._logprobs(self.ids, k + 1) if k else None
        request = {"logprobs": True, "top_logprobs": k} if k else {}
        self.heads = [json.dumps({"stream": True, "model": "deepseek-v4", "chat_request": request}).encode()[:-1]
                      for _ in range(n)]
        self.tag = tag
        self.states: list[bytes | None] = [None] * n
        self.position = [i * 7 % 4000 for i in range(n)]

    def bodies(self) -> list[bytes]:
        out = []
        for i, head in enumerate(self.heads):
            p = self.position[i]
            choice: dict = {"index": 0, "token_ids": [self.ids[p]]}
            if self.logprobs is not None:
                choice["logprobs"] = {"content": [self.logprobs["content"][p]]}
            gen = msgspec.json.encode({"request_id": f"{self.tag}-{i}", "choices": [choice]})
            state = self.states[i]
            out.append(head + b',"generate_chunk":' + gen + (SEP + state if state else b"") + b"}")
        return out

    def take(self, answers: list[bytes]) -> None:
        for i, answer in enumerate(answers):
            if not answer.startswith(b'{"chunk"'):
                raise RuntimeError(f"item {i} failed: {answer[:300]!r}")
            self.states[i] = answer.rpartition(SEP)[2][:-1]
            self.position[i] = (self.position[i] + 1) % 4000
            if self.position[i] == 0:  # start the stream over before it reaches max_model_len
                self.states[i] = None


def step_body(bodies: list[bytes]) -> bytes:
    """One engine step's job body: the streams' chunk bodies as its items."""
    return b'{"model":"deepseek-v4","endpoint":"chat","items":[' + b",".join(bodies) + b"]}"


async def step_once(client, streams: Streams, per_chunk: bool) -> int:
    bodies = streams.bodies()
    if per_chunk:
        ids = await asyncio.gather(*(client.submit("chat", b, "deepseek-v4") for b in bodies))
        results = await asyncio.gather(*(client.wait(j) for j in ids))
        answers = [r.body for r in results]
    else:
        body = step_body(bodies)
        result = await client.wait(await client.submit("step", body, "deepseek-v4"))
        if result.status != 200:
            raise RuntimeError(result.body[:300])
        answers = [bytes(r) for r in _results.decode(result.body).results]
    streams.take(answers)
    return len(answers)


async def saturate(client, groups: list[Streams], per_chunk: bool, seconds: float, pids: list[int]) -> dict:
    for g in groups:  # warm-up: every stream has a state
        await step_once(client, g, per_chunk)
    done = 0
    stop = time.perf_counter() + seconds

    async def loop(g: Streams) -> None:
        nonlocal done
        while time.perf_counter() < stop:
            n = await step_once(client, g, per_chunk)  # not `done += await ...`: that reads `done` before
            done += n

    cpu0 = time.process_time(), *(process_tree_cpu(p) for p in pids), cpu_seconds(pids[0])
    t0 = time.perf_counter()
    await asyncio.gather(*(loop(g) for g in groups))
    wall = time.perf_counter() - t0
    cpu1 = time.process_time(), *(process_tree_cpu(p) for p in pids), cpu_seconds(pids[0])
    us = [(b - a) * 1e6 / done for a, b in zip(cpu0, cpu1, strict=True)]
    return {"rate": done / wall, "producer_us": us[0], "worker_us": us[1], "redis_us": us[2], "loop_us": us[3]}


async def driven(client, streams: Streams, per_chunk: bool, seconds: float) -> dict[str, float]:
    """Step latency p50/p99 (ms) from each tick, and from the step's start:
    the tick, or when this producer woke for it. asyncio's timer wakes late
    (here ~0.6 ms at the median, ~1.8 ms at p99, measured alone): an engine
    would have its tokens at the tick, so that lateness is this script's, not
    the queue's. A step that starts late because the one before ran past its
    tick counts from the tick either way."""
    await step_once(client, streams, per_chunk)
    from_tick: list[float] = []
    from_start: list[float] = []
    start = time.perf_counter()
    tick = start
    while tick - start < seconds:
        begun = time.perf_counter()
        counted_from = tick  # the step before ran past this tick: the wait counts
        if begun < tick:
            await asyncio.sleep(tick - begun)
            begun = counted_from = time.perf_counter()
        await step_once(client, streams, per_chunk)
        end = time.perf_counter()
        from_tick.append((end - tick) * 1000)
        from_start.append((end - counted_from) * 1000)
        tick = max(tick + TICK_S, begun)  # a late step delays the next tick, as the engine would wait
    return {"tick_p50": statistics.median(from_tick), "tick_p99": pct(from_tick, 0.99),
            "start_p50": statistics.median(from_start), "start_p99": pct(from_start, 0.99)}


def in_process(args: argparse.Namespace) -> list[str]:
    from derender_queue.core import Derenderer

    registry = ModelRegistry(read_models_config(None))
    derenderer = Derenderer(registry)
    maker = BodyMaker(registry.get(None).vocab.tokenizer)
    rows = ["| streams | logprobs | step: CPU us/item | per-chunk calls: CPU us/chunk | ratio |",
            "|---|---|---|---|---|"]
    for n in args.streams:
        for k in (0, 5):
            streams = Streams(maker, n, k, f"local-{n}-{k}")
            step_us, chunk_us = [], []
            for rep in range(args.reps + 2):  # two warm-up steps: every stream has a state
                bodies = streams.bodies()
                body = step_body(bodies)
                c0 = time.process_time()
                out = derenderer.derender("step", body).body
                c1 = time.process_time()
                for b in bodies:
                    derenderer.derender("chat", b)
                c2 = time.process_time()
                streams.take([bytes(r) for r in _results.decode(out).results])
                if rep >= 2:
                    step_us.append((c1 - c0) * 1e6 / n)
                    chunk_us.append((c2 - c1) * 1e6 / n)
            a, b = statistics.median(step_us), statistics.median(chunk_us)
            rows.append(f"| {n} | {'top-5' if k else 'none'} | {a:.1f} | {b:.1f} | {a / b:.2f} |")
    return rows


async def run_all(url: str, prefix: str, pids: list[int], args: argparse.Namespace) -> list[str]:
    from derender_queue.wire.client import DerenderClient

    maker = BodyMaker(ModelRegistry(read_models_config(None), preload=False).get(None).vocab.tokenizer)
    rows = ["| streams | logprobs | path | steps in flight | chunks/s (saturation) | worker CPU us/chunk | "
            "of which its loop | producer us/chunk | redis us/chunk | step p50 / p99 ms @50/s from the tick | "
            "from the step's start |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    async with DerenderClient(url, key_prefix=prefix) as client:
        for n in args.streams:
            for k in (0, 5):
                for per_chunk in (False, True):
                    tag = f"{n}-{k}-{int(per_chunk)}"
                    lat = await driven(client, Streams(maker, n, k, f"{tag}-d"), per_chunk, args.seconds)
                    for g_count in args.groups:
                        groups = [Streams(maker, n, k, f"{tag}-{g_count}-g{g}") for g in range(g_count)]
                        sat = await saturate(client, groups, per_chunk, args.seconds, pids)
                        latency = "| "
                        if g_count == args.groups[0]:
                            latency = (f"{lat['tick_p50']:.2f} / {lat['tick_p99']:.2f} | "
                                       f"{lat['start_p50']:.2f} / {lat['start_p99']:.2f}")
                        rows.append(
                            f"| {n} | {'top-5' if k else 'none'} | {'per-chunk' if per_chunk else 'step'} | "
                            f"{g_count} | {sat['rate']:,.0f} | {sat['worker_us']:.1f} | {sat['loop_us']:.1f} | "
                            f"{sat['producer_us']:.1f} | "
                            f"{sat['redis_us']:.1f} | {latency} |")
                        print(rows[-1], file=sys.stderr, flush=True)
    return rows


def _spin(until: float) -> None:
    while time.monotonic() < until:
        pass


def timed_steps(derenderer, streams: Streams, steps: int, gap_s: float) -> list[float]:
    times = []
    for _ in range(steps):
        if gap_s:
            time.sleep(gap_s)
        body = step_body(streams.bodies())
        start = time.perf_counter()
        out = derenderer.derender("step", body).body
        times.append((time.perf_counter() - start) * 1000)
        streams.take([bytes(r) for r in _results.decode(out).results])
    return times


def longest_slow_run(times: list[float]) -> int:
    slow_at = statistics.median(times) + 1.0
    best = run_length = 0
    for t in times:
        run_length = run_length + 1 if t > slow_at else 0
        best = max(best, run_length)
    return best


def gaps(args: argparse.Namespace) -> None:
    """--gaps: one step's derender wall time back to back, with gaps, with gaps and the other core busy."""
    from derender_queue.core import Derenderer

    registry = ModelRegistry(read_models_config(None))
    derenderer = Derenderer(registry)
    maker = BodyMaker(registry.get(None).vocab.tokenizer)
    gap = args.gap_ms / 1000
    for n in args.streams:
        for k in (0, 5):
            streams = Streams(maker, n, k, f"gaps-{n}-{k}")
            timed_steps(derenderer, streams, 5, 0)  # warm-up: every stream has a state
            print(f"\n{n} streams x 1 token, {'top-5' if k else 'no'} logprobs, {args.steps} steps per mode; "
                  "step derender wall ms\n")
            print("| mode | p50 | p90 | p99 | max | longest run > median + 1 ms |")
            print("|---|---|---|---|---|---|")
            for mode in ("back to back", f"{args.gap_ms:g} ms gaps", f"{args.gap_ms:g} ms gaps, other core spinning"):
                spinner = None
                if "spinning" in mode:
                    spinner = mp.get_context("fork").Process(target=_spin, args=(time.monotonic() + 3600,), daemon=True)
                    spinner.start()
                try:
                    times = timed_steps(derenderer, streams, args.steps, 0 if mode == "back to back" else gap)
                finally:
                    if spinner is not None:
                        spinner.kill()
                        spinner.join()
                print(f"| {mode} | {statistics.median(times):.2f} | {pct(times, 0.9):.2f} | {pct(times, 0.99):.2f} | "
                      f"{max(times):.2f} | {longest_slow_run(times)} |")


def main() -> None:
    from tests.helpers.redis_process import RedisProcess
    from tests.helpers.stack import Stack

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--groups", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--no-local", action="store_true", help="skip the in-process part")
    ap.add_argument("--heavy-workers", type=int, default=1,
                    help="the worker's heavy children (DERENDER_HEAVY_WORKERS); from 2 a heavy step is shared")
    ap.add_argument("--gaps", action="store_true", help="only how steady a step's derender is, in process")
    ap.add_argument("--steps", type=int, default=300, help="--gaps: steps per mode")
    ap.add_argument("--gap-ms", type=float, default=15.0, help="--gaps: the idle gap between steps")
    args = ap.parse_args()
    if args.gaps:
        gaps(args)
        return
    local = [] if args.no_local else in_process(args)
    with RedisProcess() as redis:
        stack = Stack(redis.url, "benchstep", workers=1,
                      extra_env={"DERENDER_HEAVY_WORKERS": str(args.heavy_workers)}).start()
        try:
            pids = [stack.worker_procs[0].pid, redis.proc.pid]
            rows = asyncio.run(run_all(redis.url, "benchstep", pids, args))
        finally:
            stack.close()
    print(f"in process, 1-token chunks of N running chat streams, median of {args.reps} steps\n")
    print("\n".join(local))
    print(f"\nthrough Redis: 1-token chunks of N running chat streams, 1 worker process with "
          f"{args.heavy_workers} heavy child(ren), {args.seconds:g} s per measurement\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
