"""What the benchmarks share: the 16-token job, sequential round trips,
percentiles, and the CPU and page faults of processes and their trees from
/proc (a worker's zygote and heavy children too)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


def body16() -> bytes:
    ids = [19923, 14, 2058, 3, 671, 4787, 13769, 46012, 54994, 1060, 270, 41638, 6397, 16, 31083, 14]
    return json.dumps({"model": "deepseek-v4", "generate_response": {
        "request_id": "q", "choices": [{"index": 0, "token_ids": ids, "finish_reason": "length"}]}}).encode()


async def sequential_ms(client: Any, body: bytes, n: int, warmup: int = 50) -> list[float]:
    """Milliseconds of `n` chat derenders through `client` (a DerenderClient),
    one after another, after `warmup` untimed ones."""
    for _ in range(warmup):
        await client.derender_chat(body)
    out = []
    for _ in range(n):
        t = time.perf_counter()
        await client.derender_chat(body)
        out.append((time.perf_counter() - t) * 1000)
    return out


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(int(len(values) * q), len(values) - 1)]


def cpu_seconds(pid: int) -> float:
    fields = stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def tree_cpu_seconds(pids: list[int]) -> float:
    """CPU of `pids` and every live descendant (a worker's zygote and heavy children)."""
    return sum(process_tree_cpu(pid) for pid in pids)


def stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat after the command name (fields 3 on: `[7]` minor faults, `[11]`/`[12]` CPU ticks)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
"""/proc's utime and stime count these per second (100 on most Linux builds, not all)."""


def process_tree_cpu(root_pid: int) -> float:
    """CPU seconds of a process and all its descendants: the supervised workers
    and their heavy-job children (grandchildren of the supervisor)."""
    return sum(process_tree_stats(root_pid, (11, 12))) / CLOCK_TICKS


def process_tree_faults(root_pid: int) -> int:
    """Minor page faults of a process and all its descendants so far."""
    return process_tree_stats(root_pid, (7,))[0]


def process_tree_stats(root_pid: int, indices: tuple[int, ...]) -> list[int]:
    """Each `stat_fields` index summed over a process and its descendants."""
    values: dict[int, list[int]] = {}
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(stat.parent.name)
        values[pid] = [int(fields[i]) for i in indices]
        children.setdefault(int(fields[1]), []).append(pid)
    total, todo = [0] * len(indices), [root_pid]
    while todo:
        pid = todo.pop()
        total = [t + v for t, v in zip(total, values.get(pid, [0] * len(indices)), strict=True)]
        todo.extend(children.get(pid, ()))
    return total
