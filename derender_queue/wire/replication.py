"""Durable writes: what counts once replicas have it (WAIT), and a node's role.

Redis replicates asynchronously: a write the master acknowledged can be lost
when a replica that had not received it yet is promoted. With
`DERENDER_MIN_REPLICAS` = N > 0, the queue's writes (a submit, a worker's
result) are followed by `WAIT N timeout` on the same connection, in one round
trip (wire/lanes.py `replicated`); fewer than N acknowledgements in time raise
`NotReplicated` (a RedisError, so the API answers 503 + Retry-After and a
worker retries its result).
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError, ResponseError

from .cluster import text


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
    role = text(reply[0])
    return role, len(reply[2]) if role == "master" else None
