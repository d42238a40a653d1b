"""Where a job's CPU work runs: threads of the worker process, or a forked
child process for heavy jobs.

Threads keep the event loop responsive only because Python hands the GIL
around every switch interval, and long C calls (one msgspec decode of a
1.5 MB body holds it ~5 ms) ignore that. With DERENDER_HEAVY_EXECUTOR=process
a heavy job runs in a child process with its own GIL, forked after the model
tables were loaded and frozen, so the tables are shared copy-on-write; the
worker's loop and its light-job thread then never wait for heavy work.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from derender_queue.contract import Endpoint, error_body
from derender_queue.core import Derenderer
from derender_queue.errors import DerenderError

log = logging.getLogger("derender.worker")
Outcome = tuple[int, bytes, str | None, int]
"""(HTTP status, response body, model, completion tokens)."""

_child_derenderer: Derenderer | None = None


def compute(derenderer: Derenderer, endpoint: Endpoint, body: bytes, model: str | None) -> Outcome:
    """The CPU work (parse, detokenize, logprobs, parse, serialize); never raises."""
    try:
        rendered = derenderer.derender(endpoint, body, model)
    except DerenderError as exc:
        return exc.status, exc.body(), model, 0
    except Exception:  # a bug must not take the worker down or hang the client
        log.exception("derender failed")
        return 500, error_body(500, "internal error while derendering"), model, 0
    return 200, rendered.body, rendered.model, rendered.completion_tokens


def _child_init(nice: int) -> None:
    # The parent owns the lifecycle (it drains, then shuts the pool down).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # Heavy work yields the CPU to everything interactive on the host (the
    # worker's loop, light jobs, the API, Redis) when cores are contended.
    os.nice(nice)


def _compute_in_child(endpoint: Endpoint, body: bytes, model: str | None) -> Outcome:
    assert _child_derenderer is not None
    return compute(_child_derenderer, endpoint, body, model)


class CpuPool:
    """Runs `compute` for light jobs on a thread, for heavy ones on the
    configured executor (threads, or forked processes rebuilt if one dies)."""

    def __init__(
        self, derenderer: Derenderer, heavy: str, workers: int, on_busy: Callable[[int], None], nice: int = 10,
    ) -> None:
        self.derenderer = derenderer
        self.nice = nice
        self.light = ThreadPoolExecutor(1, thread_name_prefix="derender-light")
        self.kind = heavy
        self.workers = workers
        self.on_busy = on_busy
        self.heavy = self._new_heavy()

    def _new_heavy(self) -> Executor:
        if self.kind == "thread":
            return ThreadPoolExecutor(self.workers, thread_name_prefix="derender")
        global _child_derenderer
        _child_derenderer = self.derenderer  # inherited by fork, not pickled
        pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("fork"),
                                   initializer=_child_init, initargs=(self.nice,))
        # Start the children now, before this process has other threads.
        for future in [pool.submit(int) for _ in range(self.workers)]:
            future.result()
        return pool

    async def run(self, endpoint: Endpoint, body: bytes, model: str | None, light: bool) -> Outcome:
        loop = asyncio.get_running_loop()
        self.on_busy(1)
        try:
            if light:
                return await loop.run_in_executor(self.light, compute, self.derenderer, endpoint, body, model)
            if self.kind == "thread":
                return await loop.run_in_executor(self.heavy, compute, self.derenderer, endpoint, body, model)
            return await self._in_child(loop, endpoint, body, model)
        finally:
            self.on_busy(-1)

    async def _in_child(
        self, loop: asyncio.AbstractEventLoop, endpoint: Endpoint, body: bytes, model: str | None
    ) -> Outcome:
        pool = self.heavy
        try:
            return await loop.run_in_executor(pool, _compute_in_child, endpoint, body, model)
        except BrokenProcessPool:
            log.error("a derender child process died; starting new ones")
            if self.heavy is pool:
                self.heavy = self._new_heavy()
            return 500, error_body(500, "the process derendering this job died"), model, 0

    def shutdown(self) -> None:
        self.light.shutdown(wait=True)
        self.heavy.shutdown(wait=True)
