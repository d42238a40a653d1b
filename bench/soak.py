"""Soak: mixed jobs through the API while a worker is killed and Redis restarts.

    python bench/soak.py [--jobs 20000] [--clients 64]

A private redis-server (append-only), two `derender worker` processes and a
`derender api`. Clients send mixed chat/completion derenders (16 to 4000
tokens, with and without top-5 logprobs); a third of the way in one worker is
SIGKILLed and started again, two thirds in Redis is stopped and restarted.
Every result is checked against the in-process derender of the same request.
Prints: sent, completed, errors by kind, lost (accepted - 2xx, or 504 with a
job id - and never answered; must be 0), executed more than once (counted
from the workers' own logs once they have exited; must be 0), mismatched
(must be 0), latency p50/p99, and peak Redis memory. 503/429 refusals are
counted apart (the clients retry them after Retry-After, as a well-behaved
client would). A job that timed out (504 with its id) is followed to its end:
done (checked like any result), an error (counted as one), or lost.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import random
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT)]
sys.path += [str(ROOT / "tests"), str(ROOT / "bench")]

import redis  # noqa: E402
from bodies import BodyMaker  # noqa: E402
from httpload import Connection  # noqa: E402

from derender_queue.core import Derenderer, ModelRegistry, read_models_config  # noqa: E402
from tests.helpers.redis_process import RedisProcess  # noqa: E402
from tests.helpers.stack import Stack, get_json, wait_until  # noqa: E402

PATHS = {"chat": "/v1/chat/completions/derender", "completion": "/v1/completions/derender"}


@dataclass
class Outcome:
    sent: int = 0
    completed: int = 0
    refused: collections.Counter = field(default_factory=collections.Counter)
    errors: collections.Counter = field(default_factory=collections.Counter)
    mismatched: int = 0
    lost: int = 0
    timed_out: list[tuple[str, dict]] = field(default_factory=list)
    """(job id, expected response) of each 504 that named its job."""
    late_completed: int = 0
    """Timed-out jobs whose result came afterwards (checked like the others)."""
    latencies: list[float] = field(default_factory=list)
    duplicates: int = 0
    peak_redis_mb: float = 0.0
    seconds: float = 0.0

    def report(self) -> str:
        lat = sorted(self.latencies) or [0.0]
        return "\n".join([
            f"jobs sent: {self.sent}", f"completed: {self.completed}",
            f"errors by kind: {dict(self.errors) or 'none'}",
            f"refused (503/429, apart): {dict(self.refused) or 'none'}",
            f"timed out, then completed: {self.late_completed} of {len(self.timed_out)}",
            f"lost: {self.lost}", f"executed more than once: {self.duplicates}", f"mismatched: {self.mismatched}",
            f"latency p50 {lat[len(lat) // 2]:.1f} ms, p99 {lat[int(len(lat) * 0.99)]:.1f} ms",
            f"peak Redis memory: {self.peak_redis_mb:.1f} MB", f"wall time: {self.seconds:.0f} s",
        ])


def make_pool(distinct: int, max_tokens: int, seed: int = 7) -> list[tuple[str, bytes, dict]]:
    """Distinct request bodies and their expected (normalised) responses."""
    registry = ModelRegistry(read_models_config(None))
    maker = BodyMaker(registry.get(None).vocab.tokenizer, seed)
    derenderer = Derenderer(registry)
    rng = random.Random(seed)
    pool = []
    for _ in range(distinct):
        endpoint = rng.choice(["chat", "completion"])
        n = int(16 * (max_tokens / 16) ** rng.random())  # log-uniform 16..max
        k = rng.choice([0, 5])
        body = (maker.chat if endpoint == "chat" else maker.completion)(n, k)
        pool.append((endpoint, body, normalise(derenderer.derender(endpoint, body).body)))
    return pool


def normalise(raw: bytes) -> dict:
    data = json.loads(raw)
    data.pop("created", None)
    data.pop("id", None)
    return data


async def drive(stack: Stack, pool, jobs: int, clients: int, out: Outcome, faults) -> None:
    counter = iter(range(jobs))
    rng = random.Random(1)

    async def client() -> None:
        conn = await Connection.open("127.0.0.1", stack.api_port)
        try:
            for i in counter:
                endpoint, body, expected = pool[rng.randrange(len(pool))]
                out.sent += 1
                await faults(i)
                t = time.perf_counter()
                answer: tuple[int, bytes] | None = None
                while True:
                    try:
                        answer = await conn.request("POST", PATHS[endpoint], body)
                    except (OSError, asyncio.IncompleteReadError):
                        await conn.close()
                        conn = await Connection.open("127.0.0.1", stack.api_port)
                        answer = None  # this request has no answer (never the last one's)
                        break
                    if answer[0] not in (429, 503):
                        break
                    # Refused, not accepted: a well-behaved client honours Retry-After.
                    out.refused[answer[0]] += 1
                    await asyncio.sleep(1)
                out.latencies.append((time.perf_counter() - t) * 1000)
                if answer is None:
                    out.errors["connection"] += 1
                    continue
                status, raw = answer
                if status == 200:
                    out.completed += 1
                    out.mismatched += normalise(raw) != expected
                elif status == 504 and b"job_id" in raw:
                    out.timed_out.append((json.loads(raw)["job_id"], expected))
                else:
                    out.errors[status] += 1
        finally:
            await conn.close()

    await asyncio.gather(*(client() for _ in range(clients)))


def run_soak(jobs: int, clients: int = 64, distinct: int = 300, max_tokens: int = 4000,
             log_dir: str | None = None) -> Outcome:
    pool = make_pool(distinct, max_tokens)
    out = Outcome()
    log_dir = log_dir or tempfile.mkdtemp(prefix="soak-")
    server = RedisProcess(appendonly=True).start()
    stack = Stack(server.url, "soak", workers=2, log_dir=log_dir,
                  extra_env={"DERENDER_REQUEST_TIMEOUT_S": "60"}).start()
    r = redis.Redis.from_url(server.url)
    stop_sampling = False

    def sample_memory() -> None:
        while not stop_sampling:
            with contextlib.suppress(redis.RedisError):
                out.peak_redis_mb = max(out.peak_redis_mb, r.info("memory")["used_memory"] / 2**20)
            time.sleep(0.5)

    async def faults(i: int) -> None:
        if i == jobs // 3:
            victim = stack.worker_procs[0]
            victim.send_signal(signal.SIGKILL)
            await asyncio.to_thread(victim.wait)
            await asyncio.sleep(2)
            stack.start_worker()
        elif i == 2 * jobs // 3:
            await asyncio.to_thread(server.stop)
            await asyncio.sleep(1)
            await asyncio.to_thread(server.start)

    async def main() -> None:
        sampler = asyncio.create_task(asyncio.to_thread(sample_memory))
        start = time.perf_counter()
        await drive(stack, pool, jobs, clients, out, faults)
        out.seconds = time.perf_counter() - start
        nonlocal stop_sampling
        stop_sampling = True
        await sampler

    def final_state(job_id: str) -> dict:
        """The job's state once it is no longer pending (TimeoutError: never)."""
        return wait_until(
            lambda: (b := get_json(f"{stack.url}/v1/jobs/{job_id}")[1])["status"] != "pending" and b,
            120, 0.2, "timed-out job")

    try:
        asyncio.run(main())
        settle_timed_out(out, final_state)
    finally:
        stack.close()
        server.close()
    # Counted once the workers have exited, so every "job finished" line is written.
    out.duplicates = sum(1 for n in stack.executions().values() if n > 1)
    return out


def settle_timed_out(out: Outcome, final_state: Callable[[str], dict[str, Any]]) -> None:
    """Follow each accepted job that timed out to its end: done (checked
    against its expected response), an error result (an error), or gone (lost)."""
    for job_id, expected in out.timed_out:
        try:
            state = final_state(job_id)
        except TimeoutError:
            out.lost += 1
            continue
        if state["status"] == "done":
            out.late_completed += 1
            out.mismatched += normalise(json.dumps(state["result"]).encode()) != expected
        elif state["status"] == "error":
            out.errors[f"timed out, then {state.get('http_status')}"] += 1
        else:  # "unknown": the accepted job vanished
            out.lost += 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=4000)
    args = ap.parse_args()
    print(run_soak(args.jobs, args.clients, max_tokens=args.max_tokens).report())


if __name__ == "__main__":
    main()
