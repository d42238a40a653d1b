"""Background tasks that never die quietly.

A task that loops for the process's lifetime (a heartbeat, a subscription, a
watcher) runs under `keep_running`: if it ever ends or raises, that is logged
and counted (`on_error(name)`: each process has its background-errors
counter) and it starts again. A fire-and-forget task is started with `spawn`,
which reads its outcome: a failure is logged and counted, never left for
asyncio's "Task exception was never retrieved".
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from .failures import describe, redis_failure

log = logging.getLogger("derender.background")
RESTART_S = 1.0


def keep_running(name: str, run: Callable[[], Awaitable[None]], on_error: Callable[[str], None]) -> asyncio.Task[None]:
    """A task named `name` running `run()` for ever (until cancelled): started
    again RESTART_S after it ends or raises."""
    return asyncio.create_task(_forever(name, run, on_error), name=name)


async def _forever(name: str, run: Callable[[], Awaitable[None]], on_error: Callable[[str], None]) -> None:
    while True:
        try:
            await run()
            log.error("background task %s ended by itself; starting it again", name)
        except Exception as exc:
            _log_failure(name, exc)
        on_error(name)
        await asyncio.sleep(RESTART_S)


def spawn(coro: Coroutine[Any, Any, None], name: str, on_error: Callable[[str], None] | None,
          tasks: set[asyncio.Task[None]]) -> asyncio.Task[None]:
    """Run `coro` on its own; `tasks` holds it until it is done (asyncio keeps only weak references)."""
    task = asyncio.create_task(coro, name=name)
    tasks.add(task)

    def done(task: asyncio.Task[None]) -> None:
        tasks.discard(task)
        if task.cancelled() or (exc := task.exception()) is None:
            return
        if isinstance(exc, Exception):
            _log_failure(name, exc)
        if on_error is not None:
            on_error(name)

    task.add_done_callback(done)
    return task


def _log_failure(name: str, exc: Exception) -> None:
    if redis_failure(exc):
        log.warning("background task %s failed in Redis (%s)", name, describe(exc))
    else:
        log.error("background task %s failed", name, exc_info=exc)
