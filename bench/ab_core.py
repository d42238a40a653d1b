"""A/B: the derender core of two checkouts, timed in alternation.

    python bench/ab_core.py OTHER_CHECKOUT [--rounds 15] [--reps 9] [--sizes 500,4000]

This machine's speed drifts by 2x over minutes, so timing one tree and then
the other compares the drift. Here each tree runs in its own process (its own
virtualenv: OTHER_CHECKOUT/.venv) over the same bodies, and the two are asked
in turns, a few calls per turn: both see the same drift. Reports per case the
median over all calls of wall and CPU ms, and the ratio this/other.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOPK = (0, 5, 20)

SERVE = r"""
import json, sys, time
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/bench"]
from bodies import BodyMaker
try:
    from derender_queue.core import Derenderer, ModelRegistry, read_models_config
except ImportError:  # the tree before the layered layout
    from worker.derender import Derenderer, ModelRegistry, read_models_config
registry = ModelRegistry(read_models_config(None))
derenderer = Derenderer(registry)
maker = BodyMaker(registry.get(None).vocab.tokenizer)
cases = {}
for size in json.loads(sys.argv[2]):
    for k in (0, 5, 20):
        for endpoint in ("chat", "completion"):
            make = maker.chat if endpoint == "chat" else maker.completion
            cases[f"{endpoint} {size} top-{k}"] = (endpoint, make(size, k))
print("ready", flush=True)
for line in sys.stdin:
    case, reps = line.split("\t")
    endpoint, body = cases[case]
    out = []
    for _ in range(int(reps)):
        w, c = time.perf_counter(), time.process_time()
        derenderer.derender(endpoint, body)
        out.append(((time.perf_counter() - w) * 1e3, (time.process_time() - c) * 1e3))
    print(json.dumps(out), flush=True)
"""


def start(tree: Path, sizes: list[int]) -> subprocess.Popen[str]:
    python = tree / ".venv" / "bin" / "python"
    proc = subprocess.Popen([str(python), "-c", SERVE, str(tree), json.dumps(sizes)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=tree)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def ask(proc: subprocess.Popen[str], case: str, reps: int) -> list[tuple[float, float]]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"{case}\t{reps}\n")
    proc.stdin.flush()
    return [tuple(x) for x in json.loads(proc.stdout.readline())]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("other", type=Path, help="the other checkout (with its own .venv)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--sizes", default="500,4000")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    trees = {"this": ROOT, "other": args.other.resolve()}
    procs = {name: start(tree, sizes) for name, tree in trees.items()}
    cases = [f"{e} {n} top-{k}" for e in ("chat", "completion") for n in sizes for k in TOPK]
    times: dict[tuple[str, str], list[tuple[float, float]]] = {(n, c): [] for n in procs for c in cases}
    started = time.monotonic()
    try:
        for case in cases:
            for name in procs:
                ask(procs[name], case, 2)  # warm
            for r in range(args.rounds):
                order = list(procs) if r % 2 == 0 else list(reversed(procs))
                for name in order:
                    times[name, case] += ask(procs[name], case, args.reps)
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
    print(f"this = {trees['this']}, other = {trees['other']}; {args.rounds} alternating rounds x {args.reps} "
          f"calls per case ({time.monotonic() - started:.0f} s)\n")
    print("| case | this wall / CPU ms | other wall / CPU ms | this/other (wall) |")
    print("|---|---|---|---|")
    for case in cases:
        a, b = times["this", case], times["other", case]
        aw, ac = statistics.median(x[0] for x in a), statistics.median(x[1] for x in a)
        bw, bc = statistics.median(x[0] for x in b), statistics.median(x[1] for x in b)
        print(f"| {case} | {aw:.2f} / {ac:.2f} | {bw:.2f} / {bc:.2f} | {aw / bw:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
