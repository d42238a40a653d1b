"""`derender batch IN.jsonl OUT.jsonl`: offline derender for RL and evaluation.

One derender request per input line (chat or completion, told apart by
`generate_responses`); OUT gets one line per input line, in input order: the
response, or the error in vLLM's shape (a failed line never stops the run).
With DERENDER_REDIS_URL the lines fan out through the queue; without, local
worker processes forked after the model tables are loaded. Interrupted runs
resume: complete lines already in OUT are kept and skipped. Exit code 0, or
3 when some lines failed (listed on stderr).
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
from derender_queue.settings import Settings

if TYPE_CHECKING:
    from derender_queue.core import Derenderer
    from derender_queue.wire.client import DerenderClient

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


def resume_point(out: Path) -> int:
    """Complete lines already in OUT; a trailing partial line is cut off."""
    if not out.exists():
        return 0
    data = out.read_bytes()
    keep = data.rfind(b"\n") + 1
    if keep != len(data):
        with open(out, "r+b") as f:
            f.truncate(keep)
    return data.count(b"\n", 0, keep)


class Progress:
    def __init__(self, total: int, done: int) -> None:
        self.total, self.done, self.start_done = total, done, done
        self.start = self.last = time.monotonic()
        self.failed: list[int] = []

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
    done = resume_point(out)
    progress = Progress(total, done)
    if done:
        sys.stderr.write(f"resuming after {done:,} finished lines\n")
    with open(out, "ab") as sink:
        if settings.redis_url:
            asyncio.run(_through_queue(settings, settings.redis_url, _lines(source, done), sink, progress, window))
        else:
            _through_local_processes(settings, _lines(source, done), sink, progress, processes)
    progress.draw(time.monotonic())
    sys.stderr.write("\n")
    if progress.failed:
        shown = ", ".join(map(str, progress.failed[:20])) + (" ..." if len(progress.failed) > 20 else "")
        sys.stderr.write(f"{len(progress.failed)} lines failed: {shown}\n")
        return 3
    return 0


def _through_local_processes(
    settings: Settings, lines: Iterator[tuple[int, bytes]], sink: BinaryIO, progress: Progress, processes: int
) -> None:
    global _derenderer
    from derender_queue.core import Derenderer, ModelRegistry, read_models_config

    _derenderer = Derenderer(ModelRegistry(read_models_config(settings.models_config)))
    context = multiprocessing.get_context("fork")  # children share the frozen tables
    with context.Pool(processes) as pool:
        for number, body, ok in pool.imap(_local_one, lines, chunksize=8):
            sink.write(body + b"\n")
            progress.step(ok, number)


async def _through_queue(
    settings: Settings, redis_url: str, lines: Iterator[tuple[int, bytes]], sink: BinaryIO, progress: Progress,
    window: int,
) -> None:
    from derender_queue.wire.client import DerenderClient
    from derender_queue.wire.replication import Durability

    durability = Durability.of(settings.min_replicas, settings.replica_timeout_s)
    async with DerenderClient(redis_url, key_prefix=settings.key_prefix, durability=durability) as client:
        pending: dict[int, asyncio.Task[tuple[bytes, bool]]] = {}
        slots = asyncio.Semaphore(window)

        async def one(number: int, line: bytes) -> tuple[bytes, bool]:
            try:
                if not line.strip():
                    return error_body(400, "empty line"), False
                job_id = await _submit(client, endpoint_of(line), line, settings.request_timeout_s * 10)
                result = await client.wait(job_id, timeout=settings.request_timeout_s * 10)
                return result.body, result.status == 200
            except (TimeoutError, OSError, RedisError) as exc:
                return error_body(504, f"no result: {exc}"), False
            finally:
                slots.release()

        next_out: int | None = None
        for number, line in lines:
            await slots.acquire()
            pending[number] = asyncio.create_task(one(number, line))
            next_out = number if next_out is None else next_out
            next_out = _flush(pending, next_out, sink, progress)
        while pending:
            first = min(pending)  # the next line to write
            await asyncio.wait([pending[first]])
            _flush(pending, first, sink, progress)


async def _submit(client: DerenderClient, endpoint: Endpoint, line: bytes, patience_s: float) -> str:
    """Submit, retrying while Redis is unreachable or refuses it (a failover, too few replicas)."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            return await client.submit(endpoint, line)
        except (RedisError, OSError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(1.0)


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

