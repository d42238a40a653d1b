"""Where a job's CPU work runs: light jobs on a thread of the worker process,
heavy jobs in forked child processes.

A thread keeps the event loop responsive only because Python hands the GIL
around every switch interval, and long C calls (a msgspec decode of a
multi-megabyte body, tokenizers' decode) ignore that. bench/probe.py measures
it (its figures: docs/performance.md): under 4000-token top-5 load a small
job's p99 is several times lower with heavy jobs in a child than with them on
threads or on the loop, so heavy jobs run only in children. A heavy child has its own GIL, forked (by the zygote,
worker/zygote.py) after the model tables were loaded and frozen, so the
tables are shared copy-on-write; the worker's loop and its light-job thread
then never wait for heavy work. A step job that finds two or more children
idle is split among them (core/step.py shares), so a step's latency uses the
cores that would otherwise wait; a busy worker runs it whole. A pool built
without children (a worker served in process: tests) or whose children are
gone (no more could be forked) runs heavy jobs on the light thread too.

Streams' held text past a kilobyte lives in Redis (core/parsers/spill.py):
a job that reads some runs again with it fetched (the work is pure), and
what a job appended is written before its answer is published.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from concurrent.futures import ThreadPoolExecutor

from derender_queue.contract.error_shape import error_body
from derender_queue.contract.types import JobKind
from derender_queue.core import WHOLE_STEP, Derenderer, join_shares
from derender_queue.core.parsers.spill import HeldTextNeeded, Spill, call_spilled
from derender_queue.errors import DerenderError
from derender_queue.wire.held_text import HeldTextStore
from worker import metrics
from worker.heavy_children import HeavyChildren, HeavyChildrenGone, HeldIO, Outcome, Texts, framed

log = logging.getLogger("derender.worker")
__all__ = ["CpuPool", "Outcome", "compute"]
_FETCHES = 8
"""Fetch rounds a job may need (each fetches every key its run asked for)."""


def compute(derenderer: Derenderer, endpoint: JobKind, body: bytes, model: str | None,
            share: tuple[int, int] = WHOLE_STEP, texts: Texts | None = None) -> Outcome:
    """The CPU work (parse, detokenize, logprobs, parse, serialize); never
    raises. With `texts` (a worker with a store) held text spills."""
    spill = None if texts is None else Spill(texts)
    try:
        rendered = call_spilled(spill, lambda: derenderer.derender(endpoint, body, model, share))
    except HeldTextNeeded:
        assert spill is not None
        return 0, b"", model, 0, (list(spill.needs), [], [])
    except DerenderError as exc:
        return exc.status, exc.body(), model, 0, None
    except Exception:  # a bug must not take the worker down or hang the client
        log.exception("derender failed")
        return 500, error_body(500, "internal error while derendering"), model, 0, None
    held: HeldIO = None if spill is None or not (spill.writes or spill.drops) else ([], spill.writes, spill.drops)
    return 200, rendered.body, rendered.model, rendered.completion_tokens, held


class CpuPool:
    """Runs `compute` for light jobs on a thread, for heavy ones in child
    processes (replaced when one dies; on the thread if no more can be forked)."""

    def __init__(self, derenderer: Derenderer, children: int, nice: int = 10) -> None:
        """With `children` (heavy-job children) this forks: build it before any thread starts."""
        self.derenderer = derenderer
        self.children: HeavyChildren | None = None
        if children:
            self.children = HeavyChildren(framed(functools.partial(compute, derenderer)), children, nice)
        # The thread starts on first use, so nothing above forked a threaded process.
        self.light = ThreadPoolExecutor(1, thread_name_prefix="derender-light")
        self.held: HeldTextStore | None = None
        """Where streams' held text goes (set by the worker); None: none spills."""

    async def run(self, endpoint: JobKind, body: bytes, model: str | None, light: bool) -> Outcome:
        """One job, with the held text it reads fetched and what it appended written."""
        texts: Texts | None = None if self.held is None else {}
        for _ in range(_FETCHES):
            outcome = await self._run(endpoint, body, model, light, texts)
            if not await self._settle(outcome, texts):
                return outcome
        return _too_many_fetches(model)

    async def _settle(self, outcome: Outcome, texts: Texts | None) -> bool:
        """Writes what `outcome` appended; True (after fetching them) if it
        needs keys first."""
        held = outcome[4]
        if held is None or self.held is None or texts is None:
            return False
        needs, writes, ended = held
        if needs:
            texts.update(await self.held.fetch(needs))
            metrics.HELD_TEXT_FETCHES.inc()
            return True
        await self.held.save(writes, ended)
        metrics.HELD_TEXT_BYTES.inc(sum(len(data) for _, _, data in writes))
        return False

    async def _run(self, endpoint: JobKind, body: bytes, model: str | None, light: bool,
                   texts: Texts | None) -> Outcome:
        loop = asyncio.get_running_loop()
        with metrics.EXECUTOR_BUSY.track_inprogress():
            if not light and self.children is not None:
                try:
                    shares = self.children.idle() if endpoint == "step" else 1
                    if shares > 1:
                        return await self._shared_step(body, model, shares, texts)
                    return await self.children.run(endpoint, body, model, WHOLE_STEP, texts)
                except HeavyChildrenGone:
                    log.error("no heavy-job child can be forked: heavy jobs run on the light thread now")
                    self._children_gone()
            return await loop.run_in_executor(self.light, compute, self.derenderer, endpoint, body, model,
                                              WHOLE_STEP, texts)

    async def _shared_step(self, body: bytes, model: str | None, shares: int, texts: Texts | None) -> Outcome:
        """A step job's shares on `shares` children at once, joined in order.
        A whole-step error (a bad envelope) is every share's: the first one
        that failed answers for the step."""
        assert self.children is not None
        runs = [asyncio.ensure_future(self.children.run("step", body, model, (i, shares), texts))
                for i in range(shares)]
        metrics.EXECUTOR_BUSY.inc(shares - 1)
        try:
            outcomes = await asyncio.gather(*runs)
        except BaseException:  # one share failed, or the job was cancelled: none may run on unawaited
            for run in runs:
                run.cancel()
            raise
        finally:
            metrics.EXECUTOR_BUSY.inc(1 - shares)
        metrics.STEPS_SHARED.inc()
        held = _joined_held([outcome[4] for outcome in outcomes])
        if held is not None and held[0]:
            return 0, b"", model, 0, held
        failed = next((outcome for outcome in outcomes if outcome[0] != 200), None)
        if failed is not None:
            return failed
        served = outcomes[0][2]
        return 200, join_shares([o[1] for o in outcomes]), served, sum(o[3] for o in outcomes), held

    async def run_many(self, jobs: list[tuple[JobKind, bytes, str | None]]) -> list[Outcome]:
        """Small jobs (a batch) in one call on the light thread; a job that
        reads held text runs again alone once its keys are fetched."""
        loop = asyncio.get_running_loop()
        texts: Texts | None = None if self.held is None else {}
        with metrics.EXECUTOR_BUSY.track_inprogress():
            outcomes = await loop.run_in_executor(
                self.light, lambda: [compute(self.derenderer, *job, WHOLE_STEP, texts) for job in jobs])
        for i, outcome in enumerate(outcomes):
            if await self._settle(outcome, texts):
                outcomes[i] = await self.run(*jobs[i], light=True)
        return outcomes

    def _children_gone(self) -> None:
        if self.children is not None:
            self.children.shutdown()
            self.children = None

    def shutdown(self) -> None:
        self.light.shutdown(wait=True)
        self._children_gone()


def _joined_held(helds: list[HeldIO]) -> HeldIO:
    """The shares' held-text I/O as one job's: all needs, or all writes."""
    needs = [key for held in helds if held for key in held[0]]
    if needs:
        return needs, [], []
    writes = [w for held in helds if held for w in held[1]]
    ended = [key for held in helds if held for key in held[2]]
    return ([], writes, ended) if writes or ended else None


def _too_many_fetches(model: str | None) -> Outcome:
    log.error("a job still read held text it had not fetched after %d fetches", _FETCHES)
    return 500, error_body(500, "internal error while reading a stream's held text"), model, 0, None
