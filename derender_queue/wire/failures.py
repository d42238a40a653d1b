"""What counts as a failed Redis call, whatever the exception's type.

redis-py raises RedisError or OSError when Redis cannot be reached, but not
only those: its asyncio cluster client (redis-py 5, which arq 0.28 pins)
closes every node's connections after an error on any one node, and commands
in flight on the other nodes then fail with whatever the closed connection
raises (`AttributeError: 'NoneType' object has no attribute 'writelines'`,
uvloop's `RuntimeError: unable to perform operation on <TCPTransport
closed=True>`, ...). So code that decides what a failure means asks
`redis_failure`, never the exception's type alone: anything raised inside
redis-py is a failed call, and a failed call may or may not have run, so
whatever it wrote is unsure (read it back or write it again, never forget it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError


def redis_failure(exc: BaseException) -> bool:
    """A RedisError or OSError, or any other exception raised inside redis-py
    (cancellation and exits are never one)."""
    if isinstance(exc, RedisError | OSError):
        return True
    frame = exc.__traceback__ if isinstance(exc, Exception) else None
    while frame is not None:
        if str(frame.tb_frame.f_globals.get("__name__", "")).partition(".")[0] == "redis":
            return True
        frame = frame.tb_next
    return False


_ANNOTATION = "of pipeline caused error: "
DESCRIBE_CHARS = 200


def describe(exc: BaseException) -> str:
    """A failure for a log line: its type and message, without the command
    redis-py's pipelines prefix to it ("Command # 2 (SET key <value>) of
    pipeline caused error: ..." holds a whole job body or result), cut short."""
    text = str(exc)
    if _ANNOTATION in text:
        text = text.rpartition(_ANNOTATION)[2]
    if len(text) > DESCRIBE_CHARS:
        text = text[:DESCRIBE_CHARS] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@contextlib.contextmanager
def ignoring_redis_failures() -> Iterator[None]:
    """`contextlib.suppress` for best-effort Redis calls (a key that expires
    anyway, a connection being dropped): a failed call of any type is ignored,
    anything else (a bug) still raises."""
    try:
        yield
    except Exception as exc:
        if not redis_failure(exc):
            raise


class RedisCallFailed(RedisConnectionError):
    """A Redis call that failed inside redis-py with an error of another type (its cause)."""


@contextlib.contextmanager
def as_redis_error() -> Iterator[None]:
    """For a public API (DerenderClient): a failed Redis call of another type is
    raised again as `RedisCallFailed`, so a caller that catches RedisError (and
    sends the job again) sees every failed call."""
    try:
        yield
    except Exception as exc:
        if isinstance(exc, RedisError | OSError) or not redis_failure(exc):
            raise
        raise RedisCallFailed(describe(exc)) from exc
