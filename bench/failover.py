"""Failover soak: jobs through the API while Redis Sentinel fails the master over, twice.

    python bench/failover.py [--jobs 1000] [--clients 32] [--min-replicas 1]

A Sentinel-managed Redis on loopback (a master, one replica, three sentinels:
tests/helpers/sentinel_process.py, down-after 1 s), a `derender api` and two `derender
worker` processes on `redis+sentinel://` with DERENDER_MIN_REPLICAS. Clients
send mixed chat/completion derenders, three in four synchronous and one in
four through `POST /v1/jobs` with an Idempotency-Key (polled until done). A
third of the way in: `SENTINEL FAILOVER`. Two thirds in, once the old master
has rejoined as a replica: SIGKILL of the master then; once the sentinels have
promoted the other node, the killed one is started again as its replica (as
the compose profile's node script, or a StatefulSet, would restart it).

Prints: sent, acknowledged (200, 202, or 504 with a job id), lost
(acknowledged and never answered: must be 0), executed more than once and
executed twice with different results (from the workers' logs; the latter
must be 0), mismatched (must be 0), refusals (503, retried after Retry-After),
and per fault: when the sentinels promoted a node and how long until the
first request sent after that succeeded.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import glob
import json
import random
import secrets
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT)]
sys.path += [str(ROOT / "tests"), str(ROOT / "bench")]

import redis  # noqa: E402
from httpload import ClosedByServer, Connection  # noqa: E402
from soak import PATHS, make_pool, normalise  # noqa: E402

from tests.helpers.sentinel_process import SentinelGroup, role, wait_for  # noqa: E402
from tests.helpers.stack import Stack, get_json, wait_until  # noqa: E402


@dataclass
class Fault:
    name: str
    issued: float = 0.0
    promoted: float | None = None
    """When a node the sentinels promoted first answered ROLE as master."""
    recovered: float | None = None
    """When the first request sent after the promotion succeeded."""


@dataclass
class Outcome:
    sent: int = 0
    acknowledged: int = 0
    completed: int = 0
    refused: int = 0
    errors: collections.Counter = field(default_factory=collections.Counter)
    mismatched: int = 0
    lost: int = 0
    lost_ids: list[str] = field(default_factory=list)
    executed_twice: int = 0
    different_results: int = 0
    restarted: list[str] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    successes: list[tuple[float, float]] = field(default_factory=list)
    """(sent, answered) of every success, to find the first after a promotion."""
    seconds: float = 0.0

    def recovery_s(self, fault: Fault) -> float | None:
        if fault.promoted is None:
            return None
        after = [done for sent, done in self.successes if sent >= fault.promoted]
        return min(after) - fault.promoted if after else None

    def report(self) -> str:
        lines = [
            f"jobs sent: {self.sent}", f"acknowledged: {self.acknowledged}", f"completed: {self.completed}",
            f"refused (503, retried): {self.refused}", f"errors by kind: {dict(self.errors) or 'none'}",
            f"lost: {self.lost}", f"executed more than once: {self.executed_twice}",
            f"executed twice with different results: {self.different_results}", f"mismatched: {self.mismatched}",
            f"processes restarted: {self.restarted or 'none'}", f"wall time: {self.seconds:.0f} s",
        ]
        for f in self.faults:
            promoted = "never" if f.promoted is None else f"{f.promoted - f.issued:.1f} s after it"
            recovery = self.recovery_s(f)
            answered = "never" if recovery is None else f"{recovery:.1f} s after the promotion"
            lines.append(f"{f.name}: promotion {promoted}; first success {answered}")
        return "\n".join(lines)


class RoleWatch(threading.Thread):
    """Polls every node's ROLE; the time each one is first seen as master."""

    def __init__(self, group: SentinelGroup) -> None:
        super().__init__(daemon=True)
        self.group, self.stopped = group, threading.Event()
        self.masters: list[tuple[float, int]] = []

    def run(self) -> None:
        current = None
        while not self.stopped.is_set():
            for port in list(self.group.nodes):
                with contextlib.suppress(redis.RedisError, OSError):
                    if role(port)[0] == "master" and port != current:
                        current = port
                        self.masters.append((time.monotonic(), port))
            time.sleep(0.02)

    def promoted_after(self, since: float, old: int) -> float | None:
        return next((t for t, p in self.masters if t >= since and p != old), None)


async def drive(stack: Stack, pool, jobs: int, clients: int, out: Outcome, faults) -> None:
    counter = iter(range(jobs))
    rng = random.Random(1)

    async def request(conn_box: list[Connection], method: str, path: str, body: bytes = b"",
                      headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        try:
            try:
                return await conn_box[0].request(method, path, body, headers)
            except ClosedByServer:  # idle past the API's keep-alive (a fault paused us): not an error
                await conn_box[0].close()
                conn_box[0] = await Connection.open("127.0.0.1", stack.api_port)
                return await conn_box[0].request(method, path, body, headers)
        except (OSError, asyncio.IncompleteReadError):
            await conn_box[0].close()
            conn_box[0] = await Connection.open("127.0.0.1", stack.api_port)
            out.errors["connection"] += 1
            return 0, b""

    async def poll(conn_box: list[Connection], job_id: str, expected: dict) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            status, raw = await request(conn_box, "GET", f"/v1/jobs/{job_id}")
            body = json.loads(raw) if status in (200, 404) else {}
            if body.get("status") == "done":
                out.completed += 1
                out.mismatched += normalise(json.dumps(body["result"]).encode()) != expected
                return
            if body.get("status") == "unknown":
                out.lost += 1
                out.lost_ids.append(job_id)
                return
            if body.get("status") == "error":
                out.errors[f"job error {body['http_status']}"] += 1
                return
            await asyncio.sleep(0.2)
        out.lost += 1
        out.lost_ids.append(job_id)

    async def client() -> None:
        conn_box = [await Connection.open("127.0.0.1", stack.api_port)]
        try:
            for i in counter:
                endpoint, body, expected = pool[rng.randrange(len(pool))]
                out.sent += 1
                await faults(i)
                asynchronous = i % 4 == 3
                key = {"Idempotency-Key": secrets.token_hex(8)}
                while True:
                    sent = time.monotonic()
                    if asynchronous:
                        status, raw = await request(conn_box, "POST", f"/v1/jobs?endpoint={endpoint}", body, key)
                    else:
                        status, raw = await request(conn_box, "POST", PATHS[endpoint], body)
                    if status != 503:
                        break
                    out.refused += 1  # not acknowledged: retry (the same key) after Retry-After
                    await asyncio.sleep(1)
                if status in (200, 202):
                    out.successes.append((sent, time.monotonic()))
                if status == 200:
                    out.acknowledged += 1
                    out.completed += 1
                    out.mismatched += normalise(raw) != expected
                elif status == 202 or (status == 504 and b"job_id" in raw):
                    out.acknowledged += 1
                    data = json.loads(raw)
                    await poll(conn_box, data.get("id") or data["job_id"], expected)
                else:
                    out.errors[status] += 1
                    print(f"{status} {raw[:300]!r}", file=sys.stderr)
        finally:
            await conn_box[0].close()

    await asyncio.gather(*(client() for _ in range(clients)))


def executions(log_dir: str) -> dict[str, list[int]]:
    """Each job's result statuses, one per execution, from the workers' logs."""
    runs: dict[str, list[int]] = collections.defaultdict(list)
    for path in glob.glob(f"{log_dir}/worker-*.log"):
        with open(path, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if '"job finished"' in line:
                    record = json.loads(line)
                    runs[record["job_id"]].append(record["status"])
    return runs


def run_failover(jobs: int, clients: int = 32, distinct: int = 60, max_tokens: int = 300, min_replicas: int = 1,
                 log_dir: str | None = None, fast_timers: bool = True) -> Outcome:
    pool = make_pool(distinct, max_tokens)
    out = Outcome()
    log_dir = log_dir or tempfile.mkdtemp(prefix="failover-")
    group = SentinelGroup(replicas=1, down_after_ms=1000, failover_timeout_ms=3000, fast_timers=fast_timers).start()
    env = {"DERENDER_MIN_REPLICAS": str(min_replicas), "DERENDER_REPLICA_TIMEOUT_S": "0.5",
           "DERENDER_REQUEST_TIMEOUT_S": "30"}
    stack = Stack(group.url, "failover", workers=2, log_dir=log_dir, extra_env=env)
    watch = RoleWatch(group)
    kill_gate = asyncio.Event()

    def fail_over() -> None:
        fault = Fault("SENTINEL FAILOVER", time.monotonic())
        out.faults.append(fault)
        old = group.master_port()
        group.failover()
        fault.promoted = wait_for(lambda: watch.promoted_after(fault.issued, old), 30, "promotion")

    def kill_master() -> None:
        new = wait_for(lambda: out.faults and out.faults[0].promoted and group.master_port(), 30, "first failover")
        wait_for(lambda: group.healed(new), 60, "the old master to rejoin as a replica")
        fault = Fault("SIGKILL of the master", time.monotonic())
        out.faults.append(fault)
        group.kill(new)
        fault.promoted = wait_for(lambda: watch.promoted_after(fault.issued, new), 60, "promotion")
        # The killed node comes back as its supervisor would start it: a replica of the
        # master the sentinels name (once they name the new one).
        master = wait_for(lambda: (port := group.master_port()) != new and port, 60, "the sentinels' switch")
        group.start_node(new, replica_of=master)

    async def faults(i: int) -> None:
        if i == jobs // 3:
            asyncio.get_running_loop().run_in_executor(None, fail_over)
        elif i == 2 * jobs // 3:
            await asyncio.to_thread(kill_master)
            kill_gate.set()
        elif i > 2 * jobs // 3:
            await kill_gate.wait()  # the last third is sent once the second fault has happened

    try:
        stack.start()
        watch.start()
        start = time.perf_counter()
        asyncio.run(drive(stack, pool, jobs, clients, out, faults))
        out.seconds = time.perf_counter() - start
        out.restarted = [str(p.args[-1]) for p in stack.procs if p.poll() is not None]
        for port in group.nodes:  # every node's processes settled before counting executions
            wait_until(lambda port=port: role(port)[0] in ("master", "slave"), 30, 0.1, "node up")
        runs = executions(log_dir)
        out.executed_twice = sum(1 for statuses in runs.values() if len(statuses) > 1)
        out.different_results = sum(1 for statuses in runs.values() if len(set(statuses)) > 1)
        # The killed node comes back as a replica: ROLE says so before its link is up
        # and synced, and until then /ready (which wants MIN_REPLICAS connected) is 503.
        try:
            wait_until(lambda: get_json(stack.url + "/ready")[0] == 200, 30, 0.1, "ready at the end")
        except TimeoutError:
            out.errors[f"not ready 30 s after the end: {get_json(stack.url + '/ready')[1]}"] += 1
    finally:
        watch.stopped.set()
        stack.close()
        group.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--min-replicas", type=int, default=1)
    ap.add_argument("--log-dir", help="keep the processes' logs here")
    ap.add_argument("--sentinel-default-timers", action="store_true",
                    help="keep Sentinel's own INFO and hello periods (10 s, 2 s) instead of the tests' 1 s, 0.5 s")
    args = ap.parse_args()
    out = run_failover(args.jobs, args.clients, min_replicas=args.min_replicas, log_dir=args.log_dir,
                       fast_timers=not args.sentinel_default_timers)
    print(out.report())
    if out.lost_ids:
        print("lost:", " ".join(out.lost_ids))


if __name__ == "__main__":
    main()
