"""CPU time of a process tree, read from /proc (benchmarks only)."""

from __future__ import annotations

import os
from pathlib import Path


def stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat after the command name (fields 3 on: `[7]` minor faults, `[11]`/`[12]` CPU ticks)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process_tree_cpu(root_pid: int) -> float:
    """CPU seconds of a process and all its descendants: the supervised workers
    and their heavy-job children (grandchildren of the supervisor)."""
    cpu: dict[int, float] = {}
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(stat.parent.name)
        cpu[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        children.setdefault(int(fields[1]), []).append(pid)
    total, todo = 0.0, [root_pid]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo.extend(children.get(pid, ()))
    return total
