"""What the worker's event loop spends on a heavy child's reply, by its size.

    python bench/heavy_reply.py [--reps 30] [--mib 0.1 1.8 6.2]

In this process: one forked heavy child (worker/heavy_children.py, as the
worker runs it) whose work answers every request with a body of the given
size (1.8 and 6.2 MiB are a 4000-token chat answer with top-5 and top-20
logprobs). Each call sends a 1 KiB request and waits for the reply; the
CPU time of this process per call is what the worker's loop pays to hand a
job over and take its answer back (the child's own time is not in it).
Medians of `--reps` calls after two warm-up calls, wall time beside CPU.
Run it from two checkouts one after the other to compare them.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT)]

from worker.heavy_children import HeavyChildren, framed  # noqa: E402

REQUEST = b"{" + b" " * 1022 + b"}"


def answer_of(size: int):  # type: ignore[no-untyped-def]
    body = b"x" * size

    def compute(endpoint, request, model, share, texts):  # type: ignore[no-untyped-def]
        return 200, body, model, 0, None

    return compute


async def timed_calls(children: HeavyChildren, reps: int) -> tuple[float, float]:
    for _ in range(2):
        await children.run("chat", REQUEST, "m")
    walls, cpus = [], []
    for _ in range(reps):
        w, c = time.perf_counter(), time.process_time()
        status, out, _, _, _ = await children.run("chat", REQUEST, "m")
        cpus.append((time.process_time() - c) * 1000)
        walls.append((time.perf_counter() - w) * 1000)
        assert status == 200 and len(out) > 0
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--mib", type=float, nargs="+", default=[0.1, 1.8, 6.2])
    args = ap.parse_args()
    print(f"heavy child replies, {ROOT}; medians of {args.reps} calls (ms)\n")
    print("| reply MiB | wall | loop CPU |\n|---|---|---|")
    for mib in args.mib:
        children = HeavyChildren(framed(answer_of(int(mib * 2**20))), 1, 0)
        try:
            wall, cpu = asyncio.run(timed_calls(children, args.reps))
        finally:
            children.shutdown()
        print(f"| {mib:g} | {wall:.2f} | {cpu:.2f} |", flush=True)


if __name__ == "__main__":
    main()
