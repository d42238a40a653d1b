"""What a replacement heavy child costs: a fork of the zygote against a fresh
process that loads the tables itself.

    python bench/heavy_children.py [--forks 20] [--spawns 3]

In this process (no thread started yet): load the built-in model, build the
process-mode CpuPool (zygote + 1 child), then
- time `zygote.fork_child()` (fork, hand over the socket, get the pid
  back: what replacing a dead child costs; the event loop runs meanwhile)
  `--forks` times, each new child running one heavy job before it is closed,
  and read each child's memory after its job (/proc/PID/smaps_rollup: Rss,
  and Private = what it does not share with the zygote);
- time `--spawns` fresh interpreters that load the same model (what a
  replacement costs without a process holding the tables).
Medians, with the CPU time of the measuring process beside the wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from derender_queue.core import Derenderer, ModelRegistry  # noqa: E402
from derender_queue.models_config import BUILTIN  # noqa: E402
from tests.helpers.procs import memory_kib  # noqa: E402
from worker.cpu_pool import CpuPool  # noqa: E402
from worker.heavy_children import _Child  # noqa: E402
from worker.zygote import FRAME_HEADER_BYTES  # noqa: E402

HEAVY = (b'{"generate_response": {"request_id": "b", "choices": [{"index": 0, "token_ids": ['
         + b",".join([b"19923", b"14", b"2058", b"3"] * 4000) + b',1], "finish_reason": "stop"}]}}')
SPAWN = "from derender_queue.core import ModelRegistry; from derender_queue.models_config import BUILTIN; " \
        "ModelRegistry(BUILTIN).get('deepseek-v4')"


async def one_job(child: _Child) -> int:
    import msgspec

    lead, _ = await child.call(msgspec.msgpack.encode(("chat", None, (0, 1))), HEAVY)
    status: int = msgspec.msgpack.decode(memoryview(lead)[:-FRAME_HEADER_BYTES])[0]
    return status


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--forks", type=int, default=20)
    parser.add_argument("--spawns", type=int, default=3)
    args = parser.parse_args()
    registry = ModelRegistry(BUILTIN)
    registry.get("deepseek-v4")
    pool = CpuPool(Derenderer(registry), 1)
    assert pool.children is not None
    zygote = pool.children.zygote
    walls, cpus, rss, private = [], [], [], []
    for _ in range(args.forks):
        c0, t0 = time.process_time(), time.perf_counter()
        pid, sock = asyncio.run(zygote.fork_child())
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        child = _Child(pid, sock)
        assert asyncio.run(one_job(child)) == 200
        mem = memory_kib(pid)
        rss.append(mem["Rss"] / 1024)
        private.append((mem["Private_Clean"] + mem["Private_Dirty"]) / 1024)
        child.close()
    pool.shutdown()
    spawns = []
    for _ in range(args.spawns):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", SPAWN], check=True, cwd=ROOT, env={**os.environ})
        spawns.append(time.perf_counter() - t0)
    med = statistics.median
    print(f"fork of the zygote ({args.forks}x): median {med(walls) * 1000:.1f} ms wall, "
          f"{med(cpus) * 1000:.1f} ms CPU in the worker (includes a fresh event loop per fork)")
    print(f"  child after one heavy job: median Rss {med(rss):.0f} MiB, private {med(private):.0f} MiB "
          f"({med(private) / med(rss):.0%} of Rss; the rest is shared with the zygote)")
    print(f"fresh interpreter loading the model ({args.spawns}x): median {med(spawns) * 1000:.0f} ms wall")
    print(f"ratio fresh / fork: {med(spawns) / med(walls):.0f}x")


if __name__ == "__main__":
    main()
