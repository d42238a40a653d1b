"""What a worker does with queue entries and keys it cannot use.

Producers write straight into Redis, so anything may be there. The rule
(docs/reliability.md): a failure to start a job never stops the job loop;
it ends as an error result, or as a logged, counted drop of an id that
cannot be answered; a queue or wake key of the wrong type is counted and
repaired (wake lists only carry hints) or skipped (the queue is not ours to
delete).
"""

from __future__ import annotations

import logging

from redis.asyncio import Redis
from redis.exceptions import ResponseError, WatchError

from derender_queue.wire.keys import Keys
from worker import metrics

log = logging.getLogger("derender.worker")


def usable_id(raw: bytes) -> str | None:
    """The job id, or None when it cannot name a job: every key, result and
    log line of ours is text."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return None


async def drop_unusable_id(pool: Redis, keys: Keys, queue: str, raw: bytes) -> None:
    """Take an id that is not UTF-8 off the queue (else every poll and every
    restart meets it again) with its job key; nobody can wait for its result."""
    async with pool.pipeline(transaction=True) as pipe:
        pipe.zrem(queue, raw)
        pipe.delete(keys.job("").encode() + raw)
        await pipe.execute()
    metrics.START_FAILURES.labels("unusable_id").inc()
    log.warning("dropped a job id that is not UTF-8 from %s: %r", queue, raw[:64])


def is_wrong_type(exc: BaseException) -> bool:
    """Redis's WRONGTYPE reply, also as redis-py words it for a command of a
    pipeline ("Command # 1 (GET ...) of pipeline caused error: ...")."""
    if not isinstance(exc, ResponseError):
        return False
    reply = str(exc).rpartition(" of pipeline caused error: ")[2].lstrip("('\"")
    return reply.startswith("WRONGTYPE")


def job_value_problem(kind: bytes | str, size: int | Exception) -> tuple[str, str] | None:
    """(metric reason, error message) when a job key cannot hold a job;
    None for a string with something in it, or no key at all (withdrawn or
    expired: arq drops it, as before)."""
    kind = kind.decode() if isinstance(kind, bytes) else str(kind)
    if kind not in ("string", "none"):
        return "job_wrong_type", f"malformed job: the job key holds a Redis {kind}, not a wire-format job value"
    if kind == "string" and size == 0:
        return "job_empty", "malformed job payload: the job value is empty"
    return None


async def repair_wake_key(pool: Redis, wake_key: str) -> bool:
    """Delete a wake key that is not a list (it only carries hints: the queue
    is polled anyway). WATCHed, so a list pushed meanwhile is left alone;
    True if it was deleted."""
    metrics.WRONG_TYPE_KEYS.labels("wake").inc()
    async with pool.pipeline(transaction=True) as pipe:
        await pipe.watch(wake_key)
        kind = await pipe.type(wake_key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind in ("list", "none"):
            return False
        pipe.multi()  # type: ignore[no-untyped-call]  # redis-py 5 leaves it unannotated
        pipe.delete(wake_key)
        try:
            await pipe.execute()
        except WatchError:
            return False
    log.error("wake key %s held a Redis %s, not a list: deleted it (it only carries hints)", wake_key, kind)
    return True


class QueueTypeWatch:
    """Logs and counts a queue key of the wrong type once per occurrence
    (not once per poll), and says when it is a queue again."""

    def __init__(self, queue: str) -> None:
        self.queue = queue
        self.wrong = False

    def seen_wrong(self, exc: BaseException) -> None:
        if not self.wrong:
            self.wrong = True
            metrics.WRONG_TYPE_KEYS.labels("queue").inc()
            log.error("queue key %s is not a sorted set (%s): skipping it until it is one again; its jobs "
                      "cannot be claimed meanwhile", self.queue, exc)

    def seen_right(self) -> None:
        if self.wrong:
            self.wrong = False
            log.warning("queue key %s is a sorted set again: serving it", self.queue)
