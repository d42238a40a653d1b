"""What the benchmarks share: the 16-token job, sequential round trips,
percentiles, the CPU and page faults of processes and their trees from
/proc (a worker's zygote and heavy children too), and what a job costs Redis
in commands and round trips (`snapshot`, `per_job`)."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis


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


# What a job costs Redis in commands and round trips, counted by Redis itself.
# Commands come from INFO commandstats, so the commands a Lua script runs count
# (beside the EVALSHA), and so do MULTI and EXEC. Round trips come from INFO
# stats' total_reads_processed: one socket read per request the server received,
# so a pipeline sent in one write counts once and a blocking pop once. Both are
# server-wide: everything else talking to the server in the window counts too,
# which is why `per_job` takes an idle window to subtract.


@dataclass
class Counts:
    at: float
    reads: int
    commands: Counter[str] = field(default_factory=Counter)

    def __sub__(self, other: Counts) -> Counts:
        commands = Counter(self.commands)
        commands.subtract(other.commands)
        return Counts(self.at - other.at, self.reads - other.reads, +commands)

    def scaled(self, factor: float) -> Counts:
        return Counts(self.at * factor, round(self.reads * factor),
                      Counter({k: round(v * factor) for k, v in self.commands.items()}))


def snapshot(client: redis.Redis) -> Counts:
    """The server's counters now (its own two INFO reads are a rounding error over many jobs;
    `per_job` leaves INFO out of the commands)."""
    stats = client.info("commandstats")
    reads = int(client.info("stats")["total_reads_processed"])
    commands = Counter({name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()})
    return Counts(time.monotonic(), reads, commands)


@dataclass
class PerJob:
    commands: float
    round_trips: float
    by_command: dict[str, float]

    def report(self) -> str:
        parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(self.by_command.items(), key=lambda kv: -kv[1]))
        return f"{self.commands:.1f} commands and {self.round_trips:.1f} round trips per job ({parts})"


def per_job(busy: Counts, idle: Counts, jobs: int) -> PerJob:
    """`busy` is the delta over the jobs' window, `idle` a delta over a window with no jobs
    (heartbeats, the API's depth watcher, lease renewals), scaled to the busy window's length."""
    net = busy - idle.scaled(busy.at / idle.at if idle.at else 0.0)
    commands = {k: v / jobs for k, v in net.commands.items() if k != "info"}
    return PerJob(sum(commands.values()), net.reads / jobs, commands)
