"""Durable writes: a transaction that counts only once replicas have it (WAIT).

Redis replicates asynchronously: a write the master acknowledged can be lost
when a replica that had not received it yet is promoted. With
`DERENDER_MIN_REPLICAS` = N > 0, the queue's transactions (a submit, a
worker's result) are sent as MULTI ... EXEC then `WAIT N timeout` on the same
connection, in one round trip; fewer than N acknowledgements in time raise
`NotReplicated` (a RedisError, so the API answers 503 + Retry-After and a
worker retries its result). With N = 0 a transaction is redis-py's own
MULTI/EXEC pipeline, exactly as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError, ResponseError


class NotReplicated(RedisError):
    """Fewer replicas than required acknowledged a write within the timeout."""

    def __init__(self, acked: int, wanted: int, timeout_ms: int) -> None:
        super().__init__(f"{acked} of {wanted} Redis replicas acknowledged the write within {timeout_ms} ms")
        self.acked, self.wanted = acked, wanted


@dataclass(frozen=True)
class Durability:
    replicas: int = 0
    """Replicas that must have a write before it counts (0: the master's word is enough)."""
    timeout_ms: int = 1000
    """How long WAIT blocks for them; never 0, which would block for ever."""

    @classmethod
    def of(cls, replicas: int, timeout_s: float) -> Durability:
        return cls(replicas, max(1, round(timeout_s * 1000)))


MASTER_ONLY = Durability()
"""The default: a write counts once the master has it."""


def transaction(redis: Redis, durability: Durability) -> Pipeline:
    """A MULTI/EXEC pipeline (`async with ... as pipe`, queue commands, `await
    pipe.execute()`) whose execute also waits for `durability.replicas`."""
    if durability.replicas <= 0:
        return redis.pipeline(transaction=True)
    return ReplicatedTransaction(redis, durability)


class ReplicatedTransaction(Pipeline):
    """MULTI, the queued commands, EXEC and WAIT, written together on one
    connection (WAIT counts the replicas that have this connection's writes,
    so it must follow EXEC on the same one). Replies are Redis's own, without
    redis-py's per-command conversions: callers here ignore them."""

    def __init__(self, redis: Redis, durability: Durability) -> None:
        super().__init__(redis.connection_pool, redis.response_callbacks, True, None)
        self.durability = durability

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        commands = [args for args, _ in self.command_stack]
        wanted, timeout_ms = self.durability.replicas, self.durability.timeout_ms
        conn = await self.connection_pool.get_connection()
        try:
            await conn.send_packed_command(
                conn.pack_commands([("MULTI",), *commands, ("EXEC",), ("WAIT", wanted, timeout_ms)]))
            errors: list[ResponseError] = []
            for _ in range(len(commands) + 1):  # +OK, then +QUEUED per command
                await _read(conn, errors)
            replies = await _read(conn, errors)  # EXEC's array (EXECABORT if one was refused)
            # WAIT may take its whole timeout: the socket's own timeout must outlast it.
            socket_timeout = getattr(conn, "socket_timeout", None)
            acked = await _read(conn, errors, None if socket_timeout is None else socket_timeout + timeout_ms / 1000)
        except BaseException:
            await conn.disconnect(nowait=True)  # replies may be left unread
            raise
        finally:
            await self.connection_pool.release(conn)
            await self.reset()  # type: ignore[no-untyped-call]  # redis-py 5 leaves it unannotated
        if isinstance(replies, list):
            errors += [r for r in replies if isinstance(r, ResponseError)]
        if errors and raise_on_error:
            raise errors[0]  # the first refusal (OOM, READONLY...), not the EXECABORT it caused
        if not isinstance(acked, int) or acked < wanted:
            raise NotReplicated(acked if isinstance(acked, int) else 0, wanted, timeout_ms)
        return replies if isinstance(replies, list) else []


async def _read(conn: Any, errors: list[ResponseError], timeout: float | None = None) -> Any:
    """One reply; an error reply is collected, not raised, so that every reply is read."""
    try:
        return await conn.read_response(timeout=timeout)
    except ResponseError as exc:
        errors.append(exc)
        return None


async def node_role(redis: Redis) -> tuple[str, int | None]:
    """The connected node's ROLE (`master`, `slave`, `sentinel`) and, for a
    master, how many replicas are connected to it; ("unknown", None) when the
    server does not answer ROLE (an embedded fakeredis, an ACL without it)."""
    if isinstance(redis, RedisCluster):  # every master: the fewest replicas any has
        replies = await redis.execute_command("ROLE", target_nodes=RedisCluster.PRIMARIES)
        return "master", min(len(reply[2]) for reply in replies.values())
    try:
        reply = await redis.execute_command("ROLE")  # type: ignore[no-untyped-call]  # redis-py 5 leaves it unannotated
    except ResponseError:
        return "unknown", None
    role = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
    return role, len(reply[2]) if role == "master" else None
