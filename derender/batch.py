"""`derender batch IN.jsonl OUT.jsonl`: offline derender for RL and evaluation.

One derender request per input line (chat or completion, told apart by
`generate_responses`); OUT gets one line per input line, in input order: the
response, or the error in vLLM's shape (a failed line never stops the run).
With DERENDER_REDIS_URL the lines fan out through the queue; without, local
worker processes forked after the model tables are loaded. Interrupted runs
resume: complete lines already in OUT are kept and skipped, except errors
that may pass on a later try (503: Redis or no worker; 504; 429), which are
derendered again and replaced where they stand. Exit code 0, or 3 when some
lines failed (listed on stderr), counting the error lines an earlier run left
in OUT; 2 when IN or the models config cannot be read (one line).

Each line gets what the API would answer it: the API's own check first (not
a JSON object, a `model` that cannot be read: `requested_model`, the same
words); through the queue, a model that is not configured is a 404 at once,
and a configured model no live worker serves is a 503 once a wait of at most
the request timeout (shared by its lines) found none.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import msgspec

from derender_queue.contract.error_shape import error_body
from derender_queue.contract.model_name import requested_model
from derender_queue.contract.types import NULL, Endpoint, is_null
from derender_queue.errors import DerenderError
from derender_queue.models_config import ModelConfig, read_models_config
from derender_queue.settings import Settings
from derender_queue.wire.failures import describe, redis_failure
from derender_queue.wire.pacing import Backoff

if TYPE_CHECKING:
    from derender_queue.core import Derenderer
    from derender_queue.wire.client import DerenderClient

_ERROR_LINE = b'{"error":'
"""How every error line in OUT starts (vLLM's error shape, encoded by us)."""
TRANSIENT = frozenset({429, 503, 504})
"""Error statuses that may pass on a later try (Redis down, no live worker, a
timeout): a resumed run derenders those lines again. Other errors are the
line's answer (a bad request stays bad) and are kept."""

# The local pool's derenderer: set in the parent before forking, so the
# children share its frozen tables copy-on-write.
_derenderer: Derenderer | None = None


def endpoint_of(line: bytes) -> Endpoint:
    try:
        fields = msgspec.json.decode(line, type=dict[str, msgspec.Raw])
    except (msgspec.DecodeError, msgspec.ValidationError):
        return "chat"  # the derender will report what is wrong with it
    return "chat" if is_null(fields.get("generate_responses", NULL)) else "completion"


class _Code(msgspec.Struct):
    code: int = 0


class _ErrorLine(msgspec.Struct):
    error: _Code


@dataclass
class Resume:
    """What an earlier run left in OUT."""

    done: int = 0
    """Complete lines."""
    failed: list[int] = field(default_factory=list)
    """Error lines kept as their lines' answers."""
    retry: list[int] = field(default_factory=list)
    """Error lines that may pass now (`TRANSIENT`): derendered again."""


def resume_point(out: Path) -> Resume:
    """What OUT holds; a trailing partial line is cut off."""
    resume = Resume()
    if not out.exists():
        return resume
    kept = 0
    with open(out, "r+b") as f:
        for line in f:
            if not line.endswith(b"\n"):
                f.truncate(kept)
                break
            resume.done, kept = resume.done + 1, kept + len(line)
            if line.startswith(_ERROR_LINE):
                (resume.retry if _status(line) in TRANSIENT else resume.failed).append(resume.done)
    return resume


def _status(line: bytes) -> int:
    try:
        return msgspec.json.decode(line, type=_ErrorLine).error.code
    except (msgspec.DecodeError, msgspec.ValidationError):
        return 0


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


def _lines(path: Path, wanted: Callable[[int], bool]) -> Iterator[tuple[int, bytes]]:
    """(number, line) of IN's lines whose numbers are `wanted` (counted from 1)."""
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            if wanted(number):
                yield number, line.rstrip(b"\r\n")


def _local_one(item: tuple[int, bytes]) -> tuple[int, bytes, bool]:
    number, line = item
    assert _derenderer is not None, "set before the pool forked"
    if not line.strip():
        return number, error_body(400, "empty line"), False
    try:
        requested_model(line)  # the API's check, in its words
        return number, _derenderer.derender(endpoint_of(line), line).body, True
    except DerenderError as exc:
        return number, exc.body(), False
    except Exception as exc:  # one bad line must not stop a million-line run
        return number, error_body(500, f"internal error: {type(exc).__name__}"), False


def run_batch(settings: Settings, source: Path, out: Path, processes: int, window: int = 256) -> int:
    try:
        with open(source, "rb") as lines:
            total = sum(1 for _ in lines)
        configured = read_models_config(settings.models_config, settings.compat)
    except OSError as exc:
        sys.stderr.write(f"derender batch: cannot read {source}: {exc.strerror or exc}\n")
        return 2
    except ValueError as exc:  # the models config (it names its file)
        sys.stderr.write(f"derender batch: {exc}\n")
        return 2
    resume = resume_point(out)
    progress = Progress(total, resume.done - len(resume.retry), resume.failed)
    if resume.done:
        sys.stderr.write(f"resuming after {resume.done:,} finished lines ({len(resume.failed):,} failed for good"
                         f"{f'; {len(resume.retry):,} that failed for now are tried again' if resume.retry else ''})\n")
    if resume.retry:
        _retry(settings, configured, source, out, resume.retry, progress, processes, window)
    with open(out, "ab") as sink:
        rest = _lines(source, lambda number: number > resume.done)
        _derender_lines(settings, configured, rest, sink, progress, processes, window)
    progress.draw(time.monotonic())
    sys.stderr.write("\n")
    if progress.failed:
        failed = sorted(progress.failed)
        shown = ", ".join(map(str, failed[:20])) + (" ..." if len(failed) > 20 else "")
        earlier = f" ({progress.failed_before} of them in an earlier run)" if progress.failed_before else ""
        sys.stderr.write(f"{len(failed)} lines failed: {shown}{earlier}\n")
        return 3
    return 0


def _retry(settings: Settings, configured: tuple[ModelConfig, ...], source: Path, out: Path, numbers: list[int],
           progress: Progress, processes: int, window: int) -> None:
    """Derender the lines `numbers` again and put their answers where they
    stand in OUT. OUT is replaced at once when all are in: a run stopped
    meanwhile leaves it as it was, to be resumed the same way."""
    answers, merged = out.with_name(out.name + ".retry"), out.with_name(out.name + ".merged")
    try:
        wanted = set(numbers)
        lines = _lines(source, wanted.__contains__)
        with open(answers, "wb") as sink:
            _derender_lines(settings, configured, lines, sink, progress, processes, window)
        with open(out, "rb") as old, open(answers, "rb") as new, open(merged, "wb") as sink:
            for number, line in enumerate(old, start=1):
                sink.write((new.readline() or line) if number in wanted else line)  # IN shorter now: kept
        os.replace(merged, out)
    finally:
        for path in (answers, merged):
            path.unlink(missing_ok=True)


def _derender_lines(settings: Settings, configured: tuple[ModelConfig, ...], lines: Iterator[tuple[int, bytes]],
                    sink: BinaryIO, progress: Progress, processes: int, window: int) -> None:
    """Each line's answer to `sink`, in the lines' order."""
    if settings.redis_url:
        asyncio.run(_through_queue(settings, settings.redis_url, configured, lines, sink, progress, window))
    else:
        _through_local_processes(configured, lines, sink, progress, processes)


def _through_local_processes(
    configured: tuple[ModelConfig, ...], lines: Iterator[tuple[int, bytes]], sink: BinaryIO, progress: Progress,
    processes: int,
) -> None:
    global _derenderer
    from derender_queue.core import Derenderer, ModelRegistry

    if _derenderer is None:  # a resumed run comes here twice (`_retry`)
        _derenderer = Derenderer(ModelRegistry(configured))
    context = multiprocessing.get_context("fork")  # children share the frozen tables
    with context.Pool(processes) as pool:
        for number, body, ok in pool.imap(_local_one, lines, chunksize=8):
            sink.write(body + b"\n")
            progress.step(ok, number)


async def _through_queue(
    settings: Settings, redis_url: str, configured: tuple[ModelConfig, ...], lines: Iterator[tuple[int, bytes]],
    sink: BinaryIO, progress: Progress, window: int,
) -> None:
    from derender_queue.wire.client import DerenderClient
    from derender_queue.wire.replication import Durability

    durability = Durability.of(settings.min_replicas, settings.replica_timeout_s)
    names = [c.name for c in configured]
    async with DerenderClient(redis_url, key_prefix=settings.key_prefix, default_model=names[0],
                              durability=durability) as client:
        router = _QueueLines(client, names, settings.request_timeout_s)
        pending: dict[int, asyncio.Task[tuple[bytes, bool]]] = {}
        """In input order (a dict keeps its insertion order)."""
        slots = asyncio.Semaphore(window)

        async def one(line: bytes) -> tuple[bytes, bool]:
            try:
                return await router.derender(line)
            finally:
                slots.release()

        for number, line in lines:
            await slots.acquire()
            pending[number] = asyncio.create_task(one(line))
            _flush(pending, sink, progress)
        while pending:
            await asyncio.wait([next(iter(pending.values()))])  # the next line to write
            _flush(pending, sink, progress)


class _QueueLines:
    """One line through the queue, answered as the API would answer it."""

    def __init__(self, client: DerenderClient, configured: list[str], timeout_s: float) -> None:
        self.client, self.configured, self.timeout_s = client, configured, timeout_s
        self._worker_waits: dict[str, asyncio.Future[bool]] = {}

    async def derender(self, line: bytes) -> tuple[bytes, bool]:
        try:
            if not line.strip():
                return error_body(400, "empty line"), False
            model = requested_model(line) or self.client.default_model  # the API's check, in its words
            if model not in self.configured:
                raise DerenderError(f"The model `{model}` does not exist. Valid aliases: {', '.join(self.configured)}.",
                                    status=404, param="model")
            if not await self._served(model):
                raise DerenderError(f"no live worker serves model `{model}` (waited {self.timeout_s:g} s for one)",
                                    status=503, param="model")
            return await self._run(model, line)
        except DerenderError as exc:
            return exc.body(), False
        except Exception as exc:  # one bad line must not stop a million-line run
            if redis_failure(exc):
                return error_body(503, f"Redis is unavailable ({describe(exc)})"), False
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
        deadline, backoff = time.monotonic() + timeout, Backoff(0.5)
        while True:  # submit, retrying while Redis is unreachable or refuses it (a failover, too few replicas)
            try:
                job_id = await self.client.submit(endpoint_of(line), line, model)
                break
            except Exception as exc:
                if time.monotonic() > deadline or not redis_failure(exc):
                    raise
                await backoff.wait()
        try:
            result = await self.client.wait(job_id, timeout=timeout)
        except TimeoutError:
            await self.client.queue.cancel(job_id, model)
            return error_body(504, f"no result for job {job_id} within {timeout:g} s"), False
        return result.body, result.status == 200


def _flush(pending: dict[int, asyncio.Task[tuple[bytes, bool]]], sink: BinaryIO, progress: Progress) -> None:
    """Write finished results that are next in input order."""
    while pending:
        first = next(iter(pending))
        if not pending[first].done():
            return
        body, ok = pending.pop(first).result()
        sink.write(body + b"\n")
        progress.step(ok, first)

