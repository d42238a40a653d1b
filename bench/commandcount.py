"""What a job costs Redis in commands and round trips, counted by Redis itself.

Commands come from INFO commandstats, so the commands a Lua script runs count
(beside the EVALSHA), and so do MULTI and EXEC. Round trips come from INFO
stats' total_reads_processed: one socket read per request the server received,
so a pipeline sent in one write counts once and a blocking pop once. Both are
server-wide: everything else talking to the server in the window counts too,
which is why `per_job` takes an idle window to subtract.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import redis


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
