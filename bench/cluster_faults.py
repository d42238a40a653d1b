"""Cluster fault run (issue 31): jobs through a Redis Cluster while slots migrate and masters die.

    python bench/cluster_faults.py [--runs 3] [--rounds 2] [--masters 3] [--clients 32] [--shards 16]

Each run: a local cluster (`--masters` masters with a replica each, node
timeout 2 s), a `derender api` and two `derender worker` processes with
DERENDER_MIN_REPLICAS=1. Load, for as long as the faults last: `--clients`
HTTP clients (three requests in four synchronous derenders, one in four
`POST /v1/jobs` with an Idempotency-Key, polled) and as many DerenderClient
jobs in flight; every job has a request id of its own. Each round, once jobs
flow: the slots within 50 of one shard's tag slot migrate to another master
(that shard's queue keys with them), then a third master is SIGKILLed and,
once its replica is promoted, started again (it rejoins as a replica).

Counted: acknowledged jobs (a 200, a 202, a 504 naming its job, a
DerenderClient submit that returned), lost (acknowledged, never answered),
mismatched (answered with another request id), executed more than once (the
workers' "job finished" lines), HTTP statuses (503/429 are refusals, retried
after Retry-After), workers serving while the registry did not list them (a
worker absent from it longer than `UNLISTED_GRACE_S` that finished jobs
meanwhile), and log lines that must never appear (`BAD_LINES`).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import glob
import itertools
import json
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

from httpload import Connection  # noqa: E402

from derender_queue.wire.client import DerenderClient  # noqa: E402
from derender_queue.wire.cluster import shard_tags, slot_of, sync_client_for  # noqa: E402
from derender_queue.wire.keys import Keys, now_ms  # noqa: E402
from derender_queue.wire.replication import Durability  # noqa: E402
from tests.helpers.redis_cluster import LocalCluster  # noqa: E402
from tests.helpers.stack import Stack  # noqa: E402

PREFIX = "faults"
HEARTBEAT_S = 0.5
UNLISTED_GRACE_S = 5.0
"""A worker may drop out of the registry for a death window (3 beats) while
Redis fails over, and its heartbeat's master may be the one that died: an
absence longer than this, while it finishes jobs, is a worker serving unlisted."""
BAD_LINES = ("Task exception was never retrieved", "Unclosed ", "unhandled error", "generate_response")
"""Log lines no process may write: a task died unseen, a connection leaked, a
500, a request body in a log line."""
SETTLE_S = 90.0
"""How long an acknowledged job may take to be answered once the faults are over."""


@dataclass
class Outcome:
    runs: int = 0
    rounds: int = 0
    acknowledged: int = 0
    answered: int = 0
    lost: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)
    executed_twice: int = 0
    statuses: collections.Counter = field(default_factory=collections.Counter)
    """Every HTTP answer, by status (refusals included)."""
    errors: collections.Counter = field(default_factory=collections.Counter)
    """Client-side failures by kind (not acknowledged, or a wait that failed and was retried)."""
    unlisted: list[str] = field(default_factory=list)
    bad_lines: collections.Counter = field(default_factory=collections.Counter)
    keys_moved: int = 0
    promoted: int = 0
    seconds: float = 0.0

    def report(self) -> str:
        return "\n".join([
            f"runs: {self.runs} ({self.rounds} fault rounds), wall time {self.seconds:.0f} s",
            f"acknowledged: {self.acknowledged}", f"answered: {self.answered}",
            f"lost: {len(self.lost)} {self.lost[:5]}", f"mismatched: {len(self.mismatched)} {self.mismatched[:5]}",
            f"executed more than once: {self.executed_twice}",
            f"HTTP statuses: {dict(sorted(self.statuses.items()))}",
            f"500s: {self.statuses[500]}", f"client-side failures: {dict(self.errors) or 'none'}",
            f"workers serving unlisted: {self.unlisted or 'none'}",
            f"bad log lines: {dict(self.bad_lines) or 'none'}",
            f"queue keys migrated: {self.keys_moved}, masters killed and promoted over: {self.promoted}",
        ])


def chat_body(request_id: str, tokens: int) -> bytes:
    ids = ([19923, 14, 2058, 3, 1] * tokens)[:tokens]
    return json.dumps({"generate_response": {"request_id": request_id, "choices": [
        {"index": 0, "token_ids": ids, "finish_reason": "stop"}]}}).encode()


def answers_to(raw: bytes | str, request_id: str) -> bool:
    return bool(json.loads(raw).get("id") == request_id)


class RegistryWatch(threading.Thread):
    """Reads the workers' registry every 50 ms: (time ms, worker ids listed) per read that succeeded."""

    def __init__(self, url: str, keys: Keys) -> None:
        super().__init__(daemon=True)
        self.url, self.keys, self.stopped = url, keys, threading.Event()
        self.samples: list[tuple[int, set[str]]] = []

    def run(self) -> None:
        client = sync_client_for(self.url, socket_timeout=1, socket_connect_timeout=1)
        try:
            while not self.stopped.wait(0.05):
                now = now_ms()
                with contextlib.suppress(Exception):  # a failover: no sample
                    listed = client.zrangebyscore(self.keys.workers, now, "+inf")
                    self.samples.append((now, {w.decode() for w in listed}))
        finally:
            client.close()

    def unlisted(self, workers: set[str], finishes: list[tuple[str, int]], grace_ms: int) -> list[str]:
        """Each absence of a worker longer than `grace_ms` during which it finished jobs."""
        found = []
        for worker in sorted(workers):
            gaps, start = [], None
            for at, listed in self.samples:
                if worker not in listed and start is None:
                    start = at
                elif worker in listed and start is not None:
                    gaps.append((start, at))
                    start = None
            if start is not None:
                gaps.append((start, self.samples[-1][0]))
            for a, b in gaps:
                served = sum(1 for w, f in finishes if w == worker and a + grace_ms <= f <= b)
                if b - a > grace_ms and served:
                    found.append(f"{worker}: unlisted {(b - a) / 1000:.1f} s, finished {served} jobs meanwhile")
        return found


@dataclass
class Load:
    """The jobs of one run: what was acknowledged, and what answered it."""

    stack: Stack
    out: Outcome
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    ids: itertools.count = field(default_factory=itertools.count)
    answered: int = 0
    finishes: list[tuple[str, int]] = field(default_factory=list)
    """(worker id, finished ms) of every DerenderClient answer."""

    def done(self, ok: bool, request_id: str) -> None:
        self.answered += 1
        self.out.answered += ok
        if not ok:
            self.out.mismatched.append(request_id)

    async def answers_grow(self, n: int, timeout: float = 120.0) -> None:
        target, deadline = self.answered + n, time.monotonic() + timeout
        while self.answered < target:
            if time.monotonic() > deadline:
                raise TimeoutError(f"jobs stopped being answered ({self.answered} of {target})")
            await asyncio.sleep(0.05)

    async def http_client(self) -> None:
        conn = await Connection.open("127.0.0.1", self.stack.api_port)
        try:
            while not self.stop.is_set():
                n = next(self.ids)
                request_id, body = f"h{n}", chat_body(f"h{n}", 1 + n % 9)
                try:
                    await (self._http_job(conn, request_id, body) if n % 4 == 0
                           else self._http_sync(conn, request_id, body))
                except (OSError, asyncio.IncompleteReadError) as exc:
                    self.out.errors[f"http {type(exc).__name__}"] += 1
                    await conn.close()
                    conn = await Connection.open("127.0.0.1", self.stack.api_port)
        finally:
            await conn.close()

    async def _request(self, conn: Connection, method: str, path: str, body: bytes = b"",
                       headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        """One answer that is not a refusal (503/429 are retried after Retry-After)."""
        while True:
            status, raw = await conn.request(method, path, body, headers)
            self.out.statuses[status] += 1
            if status not in (429, 503):
                return status, raw
            await asyncio.sleep(1.0)

    async def _http_sync(self, conn: Connection, request_id: str, body: bytes) -> None:
        status, raw = await self._request(conn, "POST", "/v1/chat/completions/derender", body)
        if status == 200:
            self.out.acknowledged += 1
            self.done(answers_to(raw, request_id), request_id)
        elif status == 504 and b"job_id" in raw:
            self.out.acknowledged += 1
            await self._poll(conn, json.loads(raw)["job_id"], request_id)

    async def _http_job(self, conn: Connection, request_id: str, body: bytes) -> None:
        status, raw = await self._request(conn, "POST", "/v1/jobs?endpoint=chat", body,
                                          {"idempotency-key": request_id})
        if status == 202:
            self.out.acknowledged += 1
            await self._poll(conn, json.loads(raw)["id"], request_id)

    async def _poll(self, conn: Connection, job_id: str, request_id: str) -> None:
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline:
            status, raw = await self._request(conn, "GET", f"/v1/jobs/{job_id}")
            state = json.loads(raw) if status in (200, 404) else {}
            if state.get("status") == "done":
                self.done(answers_to(json.dumps(state["result"]), request_id), request_id)
                return
            if state.get("status") in ("error", "unknown"):
                self.out.lost.append(f"{request_id} {job_id}: {state['status']} {state.get('http_status', '')}")
                return
            await asyncio.sleep(0.1)
        self.out.lost.append(f"{request_id} {job_id}: pending")

    async def python_jobs(self, client: DerenderClient) -> None:
        while not self.stop.is_set():
            n = next(self.ids)
            request_id = f"p{n}"
            try:
                job = await client.submit("chat", chat_body(request_id, 1 + n % 9))
            except Exception as exc:  # not acknowledged: a producer sends it again
                self.out.errors[f"submit {type(exc).__name__}"] += 1
                await asyncio.sleep(0.2)
                continue
            self.out.acknowledged += 1
            await self._wait(client, job, request_id)

    async def _wait(self, client: DerenderClient, job: str, request_id: str) -> None:
        deadline = time.monotonic() + SETTLE_S
        while (left := deadline - time.monotonic()) > 0:
            try:
                result = await client.wait(job, timeout=left)
            except TimeoutError:
                break
            except Exception as exc:  # the result stays until it is read: wait again
                self.out.errors[f"wait {type(exc).__name__}"] += 1
                await asyncio.sleep(0.2)
                continue
            self.finishes.append((result.envelope.worker or "", result.envelope.finished_ms or 0))
            self.done(result.status == 200 and answers_to(result.body, request_id), request_id)
            return
        self.out.lost.append(f"{request_id} {job}: no result")


async def faults(cluster: LocalCluster, load: Load, rounds: int, shards: int) -> None:
    tags = shard_tags(shards)
    for r in range(rounds):
        await load.answers_grow(100)
        tag_slot = slot_of(tags[(3 * r) % len(tags)])
        owners = cluster.slot_owners()
        source = owners[tag_slot]
        target = next(m for m in cluster.masters() if m != source)
        slots = [s for s in range(tag_slot - 50, tag_slot + 51) if owners.get(s) == source]
        load.out.keys_moved += await asyncio.to_thread(cluster.migrate, slots, source, target)
        await load.answers_grow(100)
        victim = next(m for m in cluster.masters() if m not in (source, target))
        await asyncio.to_thread(cluster.kill_master, victim)
        load.out.promoted += 1
        await asyncio.to_thread(cluster.restart, victim)
        await load.answers_grow(100)
        load.out.rounds += 1


async def drive(cluster: LocalCluster, stack: Stack, out: Outcome, rounds: int, clients: int, shards: int,
                watch: RegistryWatch) -> list[tuple[str, int]]:
    load = Load(stack, out)
    durability = Durability.of(1, 1.0)
    async with DerenderClient(cluster.url, key_prefix=PREFIX, durability=durability, shards=shards) as client:
        jobs = [asyncio.create_task(load.http_client()) for _ in range(clients)]
        jobs += [asyncio.create_task(load.python_jobs(client)) for _ in range(clients)]
        try:
            await faults(cluster, load, rounds, shards)
        finally:
            load.stop.set()
            results = await asyncio.gather(*jobs, return_exceptions=True)
    for failure in (r for r in results if isinstance(r, BaseException)):
        out.errors[f"client task {type(failure).__name__}"] += 1
    return load.finishes


def one_run(out: Outcome, rounds: int, masters: int, clients: int, shards: int, log_dir: str) -> None:
    with LocalCluster(masters=masters, replicas=1, node_timeout_ms=2000) as cluster:
        stack = Stack(cluster.url, PREFIX, workers=2, log_dir=log_dir, extra_env={
            "DERENDER_MIN_REPLICAS": "1", "DERENDER_SHARDS": str(shards),
            "DERENDER_HEARTBEAT_S": str(HEARTBEAT_S)})
        watch = RegistryWatch(cluster.url, Keys(PREFIX, cluster=True))
        try:
            stack.start()
            watch.start()
            workers = set()
            while len(workers) < 2:  # both listed before the load starts
                workers = set().union(*(listed for _, listed in watch.samples[-1:]))
                time.sleep(0.05)
            finishes = asyncio.run(drive(cluster, stack, out, rounds, clients, shards, watch))
        finally:
            watch.stopped.set()
            stack.close()
        watch.join()
    out.unlisted += watch.unlisted(workers, finishes, int(UNLISTED_GRACE_S * 1000))
    # Read once every process has exited: each line is written by then.
    out.executed_twice += sum(1 for n in stack.executions().values() if n > 1)
    for path in glob.glob(f"{log_dir}/*.log"):
        with open(path, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                out.bad_lines.update(bad for bad in BAD_LINES if bad in line)
    out.runs += 1


def run_faults(runs: int, rounds: int, masters: int = 3, clients: int = 32, shards: int = 16,
               log_dir: str | None = None) -> Outcome:
    out = Outcome()
    start = time.monotonic()
    for run in range(runs):
        run_dir = Path(log_dir or tempfile.mkdtemp(prefix="cluster-faults-")) / f"run{run}"
        run_dir.mkdir(parents=True, exist_ok=True)
        one_run(out, rounds, masters, clients, shards, str(run_dir))
    out.seconds = time.monotonic() - start
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--masters", type=int, default=3)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--log-dir")
    args = ap.parse_args()
    print(run_faults(args.runs, args.rounds, args.masters, args.clients, args.shards, args.log_dir).report())


if __name__ == "__main__":
    main()
