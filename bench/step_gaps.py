"""How steady one step's derender is on this machine: the same 256-stream
step derendered back to back, with idle gaps between steps (as at 50
steps/s), and with gaps while another process keeps the other core busy.

    python bench/step_gaps.py [--steps 300] [--gap-ms 15] [--streams 256] [--top 5]

In process, no queue: each step is `Derenderer.derender("step", ...)` on the
streams' next 1-token chunks (bench/step.py's `Streams`), timed alone (wall
ms; the producer's body building and state splicing are outside the timing).
Prints p50 / p90 / p99 / max per mode, and per mode the longest run of
consecutive steps more than 1 ms over that mode's median: a slow phase of
the machine shows as a run, a one-off stall as a single step.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# bench/queue.py shadows the stdlib `queue`: keep bench/ off the front of sys.path.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT)]
sys.path += [str(ROOT / "tests"), str(ROOT / "bench")]

from bodies import BodyMaker  # noqa: E402
from measure import pct  # noqa: E402
from step import Streams, _results, step_body  # noqa: E402

from derender_queue.core import Derenderer, ModelRegistry, read_models_config  # noqa: E402


def _spin(until: float) -> None:
    while time.monotonic() < until:
        pass


def run(derenderer: Derenderer, streams: Streams, steps: int, gap_s: float) -> list[float]:
    times = []
    for _ in range(steps):
        if gap_s:
            time.sleep(gap_s)
        bodies = streams.bodies()
        body = step_body(bodies)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--gap-ms", type=float, default=15.0)
    ap.add_argument("--streams", type=int, default=256)
    ap.add_argument("--top", type=int, default=5, help="top logprobs per chunk (0: none)")
    args = ap.parse_args()
    registry = ModelRegistry(read_models_config(None))
    derenderer = Derenderer(registry)
    streams = Streams(BodyMaker(registry.get(None).vocab.tokenizer), args.streams, args.top, "gaps")
    run(derenderer, streams, 5, 0)  # warm-up: every stream has a state
    print(f"{args.streams} streams x 1 token, {'top-' + str(args.top) if args.top else 'no'} logprobs, "
          f"{args.steps} steps per mode; step derender wall ms\n")
    print("| mode | p50 | p90 | p99 | max | longest run > median + 1 ms |")
    print("|---|---|---|---|---|---|")
    gap = args.gap_ms / 1000
    for mode in ("back to back", f"{args.gap_ms:g} ms gaps", f"{args.gap_ms:g} ms gaps, other core spinning"):
        spinner = None
        if "spinning" in mode:
            spinner = mp.get_context("fork").Process(target=_spin, args=(time.monotonic() + 3600,), daemon=True)
            spinner.start()
        try:
            times = run(derenderer, streams, args.steps, 0 if mode == "back to back" else gap)
        finally:
            if spinner is not None:
                spinner.kill()
                spinner.join()
        print(f"| {mode} | {statistics.median(times):.2f} | {pct(times, 0.9):.2f} | {pct(times, 0.99):.2f} | "
              f"{max(times):.2f} | {longest_slow_run(times)} |")


if __name__ == "__main__":
    main()
