"""What /proc says about processes: the tree below a pid, niceness, memory.
Linux only, like the heavy-child machinery these tests check."""

from __future__ import annotations

import os
from pathlib import Path


def stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, nice) of a process; None once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # the command name may hold spaces
    return fields[0], int(fields[1]), int(fields[16])


def alive(pid: int) -> bool:
    """Running (a zombie has exited: only its exit status is left)."""
    info = stat(pid)
    return info is not None and info[0] not in ("Z", "X")


def parents() -> dict[int, int]:
    """pid -> parent pid of every live process."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (info := stat(int(entry))) is not None and info[0] not in ("Z", "X"):
            out[int(entry)] = info[1]
    return out


def descendants(root: int) -> set[int]:
    tree = parents()
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in tree.items() if parent in frontier} - found
        found |= frontier
    return found


def nice(pid: int) -> int | None:
    info = stat(pid)
    return None if info is None else info[2]


def memory_kib(pid: int) -> dict[str, int]:
    """Rss, Pss, Private_Clean, Private_Dirty, ... of a process (kB)."""
    out = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value = line.split(":", 1)
        out[name] = int(value.split()[0])
    return out


def cpu_seconds(pid: int) -> float | None:
    """CPU time the process itself has used (user + system, not its
    children's): robust on a shared machine, where wall time is not."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
