"""`derender batch` throughput: lines per second on mixed requests.

    python bench/batch.py [--lines 100000] [--processes 2]

Writes a JSONL file of mixed requests (chat and completion, 16 to 1000 tokens
log-uniform, half with the sampled token's logprob as RL pipelines ask for),
then times `derender batch` with local worker processes (no Redis), wall and
CPU of the whole process tree.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT)]
sys.path.append(str(ROOT / "bench"))

from bodies import BodyMaker  # noqa: E402

from derender_queue.core import ModelRegistry, read_models_config  # noqa: E402


def write_requests(path: Path, lines: int, seed: int = 3) -> int:
    maker = BodyMaker(ModelRegistry(read_models_config(None), preload=False).get(None).vocab.tokenizer, seed)
    rng = random.Random(seed)
    tokens = 0
    with open(path, "wb") as f:
        for _ in range(lines):
            n = int(16 * (1000 / 16) ** rng.random())
            k = rng.choice([0, 1])
            body = (maker.chat if rng.random() < 0.5 else maker.completion)(n, k)
            f.write(body + b"\n")
            tokens += n
    return tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--processes", type=int, default=2)
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="batch-bench-"))
    src, dst = folder / "in.jsonl", folder / "out.jsonl"
    t = time.perf_counter()
    tokens = write_requests(src, args.lines)
    print(f"wrote {args.lines:,} requests ({tokens:,} tokens, {src.stat().st_size / 2**20:.0f} MB) "
          f"in {time.perf_counter() - t:.0f} s", flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "derender.cli", "batch", str(src), str(dst),
                          "--processes", str(args.processes)], env={**os.environ, "DERENDER_REDIS_URL": ""},
                         stderr=subprocess.PIPE)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open(dst, "rb") as written:
        out_lines = sum(1 for _ in written)
    assert run.returncode == 0 and out_lines == args.lines, (run.returncode, out_lines, run.stderr[-500:])
    print(f"derender batch, {args.processes} local processes: {args.lines / wall:,.0f} lines/s, "
          f"{tokens / wall:,.0f} tokens/s (wall {wall:.1f} s, CPU {cpu:.1f} s = {cpu / wall:.2f} cores)")
    for path in (src, dst):
        path.unlink()
    folder.rmdir()


if __name__ == "__main__":
    main()
