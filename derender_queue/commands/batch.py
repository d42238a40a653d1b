"""`derender batch IN.jsonl OUT.jsonl`: offline derender for RL and evaluation.

One derender request per input line (chat or completion, told apart by
`generate_responses`); OUT gets one line per input line, in input order: the
response, or the error in vLLM's shape (a failed line never stops the run).
With DERENDER_REDIS_URL the lines fan out through the queue; without, local
worker processes forked after the model tables are loaded. Interrupted runs
resume: complete lines already in OUT are kept and skipped. Exit code 0, or
3 when some lines failed (listed on stderr), counting the error lines an
earlier run left in OUT.

Through the queue each line gets what the API would answer it: a model that
is not configured is a 404 at once; a configured model no live worker serves
is a 503 once a wait of at most the request timeout (shared by its lines)
found none; a line whose model cannot be read goes to the default model, so
its worker answers the same 400 a local run gives.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import msgspec
from redis.exceptions import RedisError

from derender_queue.contract import NULL, Endpoint, error_body, is_null
from derender_queue.errors import DerenderError
from derender_queue.settings import Settings

if TYPE_CHECKING:
    from derender_queue.core import Derenderer
    from derender_queue.wire.client import DerenderClient

_ERROR_LINE = b'{"error":'
"""How every error line in OUT starts (vLLM's error shape, encoded by us)."""

# The local pool's derenderer: set in the parent before forking, so the
# children share its frozen tables copy-on-write.
_derenderer: Derenderer | None = None


class _Which(msgspec.Struct):
    generate_responses: msgspec.Raw = msgspec.field(default_factory=lambda: NULL)


def endpoint_of(line: bytes) -> Endpoint:
    try:
        which = msgspec.json.decode(line, type=_Which)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return "chat"  # the derender will report what is wrong with it
    return "chat" if is_null(which.generate_responses) else "completion"


def resume_point(out: Path) -> tuple[int, list[int]]:
    """Complete lines already in OUT and the numbers of those that are errors;
    a trailing partial line is cut off."""
    if not out.exists():
        return 0, []
    done, kept, failed = 0, 0, []
    with open(out, "r+b") as f:
        for line in f:
            if not line.endswith(b"\n"):
                f.truncate(kept)
                break
            done, kept = done + 1, kept + len(line)
            if line.startswith(_ERROR_LINE):
                failed.append(done)
    return done, failed


class Progress:
    def __init__(self, total: int, done: int, failed_before: list[int] | None = None) -> None:
        self.total, self.done, self.start_done = total, done, done
        self.start = self.last = time.monotonic()
        self.failed: list[int] = list(failed_before or [])
        self.failed_before = len(self.failed)

    def step(self, ok: bool, line_no: int) -> None:
        self.done += 1
        if not ok:
            self.failed.append(line_no)
        now = time.monotonic()
        if now - self.last >= 0.25 or self.done == self.total:
            self.last = now
            self.draw(now)

    def draw(self, now: float) -> None:
        rate = (self.done - self.start_done) / max(now - self.start, 1e-9)
        left = (self.total - self.done) / rate if rate else float("inf")
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        eta = f"{int(left // 60)}m{int(left % 60):02d}s" if left != float("inf") else "?"
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done:,}/{self.total:,} "
                         f"{rate:,.0f} lines/s ETA {eta} failed {len(self.failed)}  ")
        sys.stderr.flush()


def _lines(path: Path, skip: int) -> Iterator[tuple[int, bytes]]:
    with open(path, "rb") as f:
        for number, line in enumerate(itertools.islice(f, skip, None), start=skip + 1):
            yield number, line.rstrip(b"\r\n")


def _local_one(item: tuple[int, bytes]) -> tuple[int, bytes, bool]:
    from derender_queue.errors import DerenderError

    number, line = item
    assert _derenderer is not None, "set before the pool forked"
    if not line.strip():
        return number, error_body(400, "empty line"), False
    try:
        return number, _derenderer.derender(endpoint_of(line), line).body, True
    except DerenderError as exc:
        return number, exc.body(), False
    except Exception as exc:  # one bad line must not stop a million-line run
        return number, error_body(500, f"internal error: {type(exc).__name__}"), False


def run_batch(settings: Settings, source: Path, out: Path, processes: int, window: int = 256) -> int:
    with open(source, "rb") as lines:
        total = sum(1 for _ in lines)
    done, failed_before = resume_point(out)
    progress = Progress(total, done, failed_before)
    if done:
        sys.stderr.write(f"resuming after {done:,} finished lines ({len(failed_before):,} of them failed)\n")
    with open(out, "ab") as sink:
        if settings.redis_url:
            asyncio.run(_through_queue(settings, settings.redis_url, _lines(source, done), sink, progress, window))
        else:
            _through_local_processes(settings, _lines(source, done), sink, progress, processes)
    progress.draw(time.monotonic())
    sys.stderr.write("\n")
    if progress.failed:
        shown = ", ".join(map(str, progress.failed[:20])) + (" ..." if len(progress.failed) > 20 else "")
        earlier = f" ({progress.failed_before} of them in an earlier run)" if progress.failed_before else ""
        sys.stderr.write(f"{len(progress.failed)} lines failed: {shown}{earlier}\n")
        return 3
    return 0


def _through_local_processes(
    settings: Settings, lines: Iterator[tuple[int, bytes]], sink: BinaryIO, progress: Progress, processes: int
) -> None:
    global _derenderer
    from derender_queue.core import Derenderer, ModelRegistry, read_models_config

    _derenderer = Derenderer(ModelRegistry(read_models_config(settings.models_config, settings.compat)))
    context = multiprocessing.get_context("fork")  # children share the frozen tables
    with context.Pool(processes) as pool:
        for number, body, ok in pool.imap(_local_one, lines, chunksize=8):
            sink.write(body + b"\n")
            progress.step(ok, number)


async def _through_queue(
    settings: Settings, redis_url: str, lines: Iterator[tuple[int, bytes]], sink: BinaryIO, progress: Progress,
    window: int,
) -> None:
    from derender_queue.models_config import read_models_config
    from derender_queue.wire.client import DerenderClient
    from derender_queue.wire.replication import Durability

    durability = Durability.of(settings.min_replicas, settings.replica_timeout_s)
    configured = [c.name for c in read_models_config(settings.models_config)]
    async with DerenderClient(redis_url, key_prefix=settings.key_prefix, default_model=configured[0],
                              durability=durability) as client:
        router = _QueueLines(client, configured, settings.request_timeout_s)
        pending: dict[int, asyncio.Task[tuple[bytes, bool]]] = {}
        slots = asyncio.Semaphore(window)

        async def one(line: bytes) -> tuple[bytes, bool]:
            try:
                return await router.derender(line)
            finally:
                slots.release()

        next_out: int | None = None
        for number, line in lines:
            await slots.acquire()
            pending[number] = asyncio.create_task(one(line))
            next_out = number if next_out is None else next_out
            next_out = _flush(pending, next_out, sink, progress)
        while pending:
            first = min(pending)  # the next line to write
            await asyncio.wait([pending[first]])
            _flush(pending, first, sink, progress)


async def _submit(client: DerenderClient, endpoint: Endpoint, line: bytes, model: str, patience_s: float) -> str:
    """Submit, retrying while Redis is unreachable or refuses it (a failover, too few replicas)."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            return await client.submit(endpoint, line, model)
        except (RedisError, OSError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(1.0)


class _QueueLines:
    """One line through the queue, answered as the API would answer it."""

    def __init__(self, client: DerenderClient, configured: list[str], timeout_s: float) -> None:
        self.client, self.configured, self.timeout_s = client, configured, timeout_s
        self._worker_waits: dict[str, asyncio.Future[bool]] = {}

    async def derender(self, line: bytes) -> tuple[bytes, bool]:
        try:
            if not line.strip():
                return error_body(400, "empty line"), False
            model = self.client.model_of(line)
            if model not in self.configured:
                raise DerenderError(f"The model `{model}` does not exist. Valid aliases: {', '.join(self.configured)}.",
                                    status=404, param="model")
            if not await self._served(model):
                raise DerenderError(f"no live worker serves model `{model}` (waited {self.timeout_s:g} s for one)",
                                    status=503, param="model")
            return await self._run(model, line)
        except DerenderError as exc:
            return exc.body(), False
        except (RedisError, OSError) as exc:
            return error_body(503, f"Redis is unavailable ({type(exc).__name__}: {exc})"), False
        except Exception as exc:  # one bad line must not stop a million-line run
            return error_body(500, f"internal error: {type(exc).__name__}"), False

    async def _served(self, model: str) -> bool:
        """Whether a live worker serves `model`; the first line that finds
        none waits up to the request timeout for one, the lines meanwhile
        share that wait, and later ones are answered at once until one comes."""
        served = await self.client.served_models()
        if served is None or model in served:
            self._worker_waits.pop(model, None)
            return True
        wait = self._worker_waits.get(model)
        if wait is None:
            wait = self._worker_waits[model] = asyncio.ensure_future(
                self.client.wait_for_worker(model, self.timeout_s))
        return await asyncio.shield(wait)

    async def _run(self, model: str, line: bytes) -> tuple[bytes, bool]:
        # Lines queue behind up to --window others: wait ten request timeouts,
        # then withdraw the job if no worker started it.
        timeout = self.timeout_s * 10
        job_id = await _submit(self.client, endpoint_of(line), line, model, timeout)
        try:
            result = await self.client.wait(job_id, timeout=timeout)
        except TimeoutError:
            await self.client.queue.cancel(job_id, model)
            return error_body(504, f"no result for job {job_id} within {timeout:g} s"), False
        return result.body, result.status == 200


def _flush(
    pending: dict[int, asyncio.Task[tuple[bytes, bool]]], next_out: int, sink: BinaryIO, progress: Progress
) -> int:
    """Write finished results that are next in input order."""
    while next_out in pending and pending[next_out].done():
        body, ok = pending.pop(next_out).result()
        sink.write(body + b"\n")
        progress.step(ok, next_out)
        next_out += 1
    return next_out


def default_processes() -> int:
    return max(os.cpu_count() or 1, 1)

