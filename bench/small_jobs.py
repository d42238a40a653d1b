"""What the queue benchmarks share: the 16-token job, sequential round trips,
percentiles, and the CPU of processes and their trees from /proc (a worker's
zygote and heavy children too)."""

from __future__ import annotations

import json
import time
from typing import Any

from cpu import CLOCK_TICKS, process_tree_cpu, stat_fields


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
