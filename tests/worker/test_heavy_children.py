"""Heavy-job children live and die with their worker (issue 12, item 4):
a SIGKILLed worker takes them along, and a dead child is replaced by a fork
of the loaded tables (copy-on-write) made by a single-threaded zygote, never
by the worker's threaded, event-loop-running process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from derender_queue.wire.client import DerenderClient
from derender_queue.wire.queue import LIGHT_BODY_BYTES
from tests.helpers.procs import alive, descendants, memory_kib, nice, stat
from tests.helpers.stack import Stack, get_json, wait_until
from tests.helpers.stream_support import without_clock

HEAVY_NICE = 10
# A body over 32 KiB: its CPU work runs in a heavy child.
HEAVY_BODY = {"generate_response": {"request_id": "heavy", "choices": [
    {"index": 0, "token_ids": [19923, 14, 2058, 3] * 4000 + [1], "finish_reason": "stop"}]}}


def heavy_children(worker_pid: int) -> set[int]:
    return {p for p in descendants(worker_pid) if nice(p) == HEAVY_NICE}


def start_worker(s: Stack, heavy_workers: int):
    worker = s.start_worker(DERENDER_HEAVY_WORKERS=str(heavy_workers))
    wait_until(lambda: get_json(f"http://127.0.0.1:{s.metrics_ports[-1]}/health")[0] == 200, 60,
               what="the worker up")
    children = wait_until(lambda: len(kids := heavy_children(worker.pid)) == heavy_workers and kids, 30,
                          what=f"{heavy_workers} heavy children")
    return worker, children


def kill_all(pids: set[int]) -> None:
    for pid in pids:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_sigkilled_worker_takes_its_heavy_children_with_it(redis_server, prefix):
    s = Stack(redis_server.url, prefix, workers=0)
    family: set[int] = set()
    try:
        worker, _ = start_worker(s, 2)
        family = descendants(worker.pid)
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        wait_until(lambda: not any(alive(p) for p in family), 20, what="the worker's children gone with it")
    finally:
        kill_all(family)
        s.close()


def test_a_dead_heavy_child_is_replaced_by_a_fork_of_the_loaded_tables(redis_server, prefix):
    s = Stack(redis_server.url, prefix, workers=0)
    family: set[int] = set()
    try:
        worker, before = start_worker(s, 2)
        family = descendants(worker.pid)
        victim = min(before)
        os.kill(victim, signal.SIGKILL)

        async def heavy_jobs() -> list[int]:
            async with DerenderClient(redis_server.url, key_prefix=prefix) as client:
                ids = [await client.submit("chat", HEAVY_BODY) for _ in range(4)]
                return [(await client.wait(i, 60)).status for i in ids]

        # Both children are used; the job that met the dead one runs again on its replacement.
        assert asyncio.run(heavy_jobs()) == [200] * 4
        after = wait_until(lambda: len(kids := heavy_children(worker.pid)) == 2 and victim not in kids and kids,
                           30, what="two heavy children again, the dead one replaced")
        family |= descendants(worker.pid)
        (new,) = after - before
        assert stat(new)[1] != worker.pid, "forked by the zygote, not by the threaded worker"
        mem = memory_kib(new)
        private = mem["Private_Clean"] + mem["Private_Dirty"]
        assert mem["Rss"] > 100_000 and private < mem["Rss"] / 2, mem  # the tables are shared, not copied
    finally:
        kill_all(family)
        s.close()


def test_a_step_is_shared_among_idle_heavy_children_and_answers_as_a_whole(redis_server, prefix):
    """With two children idle, a heavy step runs as two shares side by side
    (core/step.py): the same answers as each item's per-chunk job, and a bad
    envelope fails the step as it would whole."""
    items = _heavy_step_items("h")
    s = Stack(redis_server.url, prefix, workers=0)
    family: set[int] = set()
    try:
        worker, _ = start_worker(s, 2)
        family = descendants(worker.pid)

        async def main() -> list[tuple[int, dict]]:
            async with DerenderClient(redis_server.url, key_prefix=prefix) as client:
                return [await _answer(client, "step", _step_body(items)),
                        await _answer(client, "step", _step_body(items, b'"x": 1, ')),
                        *[await _answer(client, "chat", body) for body in items]]

        (status, shared), (refused, error), *alone = asyncio.run(main())
        assert status == 200 and all(code == 200 for code, _ in alone)
        assert [without_clock(r) for r in shared["results"]] == [without_clock(r) for _, r in alone]
        assert refused == 400 and error["error"]["type"] == "BadRequestError"
        assert s.worker_metric("derender_worker_steps_shared_total") == 2
    finally:
        kill_all(family)
        s.close()


def test_a_share_that_meets_a_dead_child_runs_again_and_the_step_is_answered_whole(redis_server, prefix):
    """The worker learns of a dead child when it uses it: one of the step's
    two shares goes to the dead child, is run again on its replacement, and
    the step's answer is the same as from two live children."""
    body = _step_body(_heavy_step_items("d"))
    s = Stack(redis_server.url, prefix, workers=0)
    family: set[int] = set()
    try:
        worker, before = start_worker(s, 2)
        family = descendants(worker.pid)

        async def step() -> tuple[int, dict]:
            async with DerenderClient(redis_server.url, key_prefix=prefix) as client:
                return await _answer(client, "step", body)

        status, healthy = asyncio.run(step())
        os.kill(min(before), signal.SIGKILL)
        status_after, answered = asyncio.run(step())
        family |= descendants(worker.pid)
        assert status == status_after == 200
        assert [without_clock(r) for r in answered["results"]] == [without_clock(r) for r in healthy["results"]]
        assert s.worker_metric("derender_worker_steps_shared_total") == 2
        assert s.worker_metric("derender_worker_heavy_child_restarts_total") == 1
    finally:
        kill_all(family)
        s.close()


def _heavy_step_items(tag: str) -> list[bytes]:
    """300 streams' first chunks: together past LIGHT_BODY_BYTES, a heavy step."""
    items = [json.dumps({"stream": True, "generate_chunk": {"request_id": f"{tag}{i}", "choices": [
        {"index": 0, "token_ids": [19923, 14, 2058]}]}}).encode() for i in range(300)]
    assert len(b",".join(items)) > LIGHT_BODY_BYTES
    return items


def _step_body(items: list[bytes], extra: bytes = b"") -> bytes:
    return b'{"endpoint": "chat", ' + extra + b'"items": [' + b",".join(items) + b"]}"


async def _answer(client: DerenderClient, kind: str, body: bytes) -> tuple[int, dict]:
    result = await client.wait(await client.submit(kind, body), 60)
    return result.status, json.loads(bytes(result.body))


_ZYGOTE_GONE = """
import asyncio, json, os, signal, sys
from derender_queue.core import Derenderer, ModelRegistry, read_models_config
from worker.cpu_pool import CpuPool

pool = CpuPool(Derenderer(ModelRegistry(read_models_config(None))), 1)
for pid in [pool.children.zygote.pid, *(child.pid for child in pool.children._all)]:
    os.kill(pid, signal.SIGKILL)
body = json.dumps({"model": "deepseek-v4", "generate_response": {"request_id": "r", "choices": [
    {"index": 0, "token_ids": [19923, 14], "finish_reason": "length"}]}}).encode()
status, out, _, tokens, _ = asyncio.run(pool.run("chat", body, None, light=False))
print(json.dumps([status, tokens, pool.children is None, json.loads(out)["choices"][0]["message"]["content"]]))
"""


def test_a_heavy_job_runs_on_the_light_thread_once_no_child_can_be_forked():
    """The zygote and its child killed: the heavy job is still answered (0.3.0
    removed the heavy threads it used to fall back to)."""
    done = subprocess.run([sys.executable, "-c", _ZYGOTE_GONE], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    status, tokens, gone, content = json.loads(done.stdout.strip().splitlines()[-1])
    assert (status, tokens, gone) == (200, 2, True) and content
    assert "no heavy-job child can be forked" in done.stderr
