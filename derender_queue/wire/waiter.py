"""Waiting for results without polling: one pub/sub subscription per process.

Each API process (or Python client) subscribes once to `{p}:done:{reply_to}`
and names that channel in every job it submits; the worker publishes the job
id when the result is written, and the waiting task wakes directly. A slow
fallback GET covers notifications lost while the subscription reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from .background import keep_running, spawn
from .envelope import ResultEnvelope, parse_notifications, result_view
from .failures import describe, redis_failure
from .keys import Keys, random_id
from .pacing import Backoff
from .queue import JobQueue
from .sharded_pubsub import ShardedSubscriber

log = logging.getLogger(__name__)
FALLBACK_POLL_S = 1.0
TASK = "result-waiter"


class ResultWaiter:
    def __init__(self, redis: Redis, keys: Keys, on_error: Callable[[str], None] | None = None,
                 tags: tuple[str, ...] = ()) -> None:
        self.redis = redis
        self.keys = keys
        self.tags = tags
        """On a Redis Cluster, the shards whose channels carry our notifications."""
        self.reply_to = random_id()
        self.on_error = on_error or (lambda _: None)
        """Called with the task's name whenever a background task survives an error."""
        self._pending: dict[str, asyncio.Event] = {}
        self._inline: dict[str, bytes] = {}
        self._cleanup: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()

    async def start(self) -> None:
        listen = self._listen_sharded if isinstance(self.redis, RedisCluster) else self._listen
        self._task = keep_running(TASK, listen, self.on_error)
        # Subscribed before the first submit, so no notification can be missed.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._subscribed.wait(), 5)

    async def close(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def expect(self, job_id: str) -> None:
        """Register interest before submitting, so the notification has a home."""
        self._pending[job_id] = asyncio.Event()

    def forget(self, job_id: str) -> None:
        self._pending.pop(job_id, None)
        self._inline.pop(job_id, None)

    async def wait(self, queue: JobQueue, job_id: str, timeout: float) -> tuple[ResultEnvelope, memoryview] | None:
        """The result (consumed), or None when `timeout` passes first."""
        event = self._pending.setdefault(job_id, asyncio.Event())
        deadline = time.monotonic() + timeout
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(event.wait(), min(remaining, FALLBACK_POLL_S))
                value = self._inline.pop(job_id, None)
                result: tuple[ResultEnvelope, memoryview] | None
                if value is not None:  # delivered in the notification
                    result = result_view(value)
                else:
                    try:
                        result = (await queue.lookup(job_id)).result
                    except Exception as exc:
                        if not redis_failure(exc):
                            raise
                        # The job is accepted; keep waiting for Redis until the deadline.
                        await asyncio.sleep(min(0.2, max(deadline - time.monotonic(), 0)))
                        continue
                if result is not None:
                    # Drop the stored copy only once we hold the result, off the hot
                    # path: a GETDEL whose reply a dropped connection loses would
                    # destroy the only copy.
                    spawn(queue.discard_result(job_id), "result-discard", self.on_error, self._cleanup)
                    return result
                event.clear()
        finally:
            self.forget(job_id)

    def _deliver(self, message: dict[str, Any]) -> None:
        try:
            delivered = parse_notifications(message["data"])
        except (UnicodeDecodeError, KeyError, TypeError, AttributeError, ValueError) as exc:
            log.warning("skipped a notification that is not ours to read (%s)", exc)
            self.on_error(TASK)
            return
        for job_id, value in delivered:
            event = self._pending.get(job_id)
            if event is not None:
                if value is not None:
                    self._inline[job_id] = value
                event.set()

    def _wake_all(self) -> None:
        """Waiters fall back to GET while the subscription is down: check now."""
        for event in self._pending.values():
            event.set()

    async def _listen(self) -> None:
        channel = self.keys.done(self.reply_to)
        backoff = Backoff(0.2)
        while True:
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(channel)
                self._subscribed.set()
                backoff.reset()
                async for message in pubsub.listen():
                    self._deliver(message)
            except Exception as exc:  # nothing ends the subscription: waiters would only poll
                if redis_failure(exc):
                    log.warning("result subscription lost (%s); resubscribing", describe(exc))
                else:
                    log.exception("result subscription failed; resubscribing")
                    self.on_error(TASK)
                self._wake_all()
                await backoff.wait()
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py 5 leaves it unannotated

    async def _listen_sharded(self) -> None:
        """On a Redis Cluster: one shard channel per shard (a worker announces in
        its job's slot, with SPUBLISH), followed wherever its slot moves; what
        was published while one moved is found by the waiters' GET."""
        subscriber = ShardedSubscriber.of(cast(RedisCluster, self.redis), on_resubscribed=lambda _: self._wake_all(),
                                          on_error=self.on_error)
        backoff = Backoff(1.0)
        try:
            while True:
                try:
                    await subscriber.subscribe(*(self.keys.shard_done(tag, self.reply_to) for tag in self.tags))
                    break
                except Exception as exc:  # refused (ACL): waiters only poll meanwhile
                    if not redis_failure(exc):
                        raise
                    delay = backoff.next_s()
                    log.warning("result subscription refused (%s); retrying in %.1f s", describe(exc), delay)
                    self.on_error(TASK)
                    await asyncio.sleep(delay)
            self._subscribed.set()
            async for _, payload in subscriber:
                self._deliver({"data": payload})
        finally:
            await subscriber.aclose()
