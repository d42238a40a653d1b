"""CPU time of a process tree, read from /proc (benchmarks only)."""

from __future__ import annotations

import os
from pathlib import Path


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
