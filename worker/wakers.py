"""A claim loop's own connection for its blocking claim (worker/lane_server.py):
to the one Redis, or on a Redis Cluster to the master serving its shard's
slot, found again when the slot moves or its master fails over."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Protocol, cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from derender_queue.wire.cluster import SlotClient, SlotMap, connection_kwargs, slot_of
from derender_queue.wire.connection import copy_pool, in_memory


def blocking_client(pool: Redis, block_s: float = 0.0, reply_timeout_s: float | None = None) -> Redis:
    """A client of its own to the pool's server (for a blocking command, or
    never to queue behind the pool's users). Its reply timeout: `reply_timeout_s`
    or the pool's, plus `block_s`, the longest its command blocks in Redis;
    none if neither is set. fakeredis's in-memory server is shared instead."""
    if in_memory(pool):
        return pool
    kwargs: dict[str, Any] = dict(pool.connection_pool.connection_kwargs)
    timeout = kwargs.get("socket_timeout") if reply_timeout_s is None else reply_timeout_s
    options: dict[str, Any] = {"max_connections": 1}
    if timeout is not None:
        options["socket_timeout"] = timeout + block_s
    return Redis.from_pool(copy_pool(pool.connection_pool, **options))  # a Sentinel pool too


class Waker(Protocol):
    async def get(self) -> Redis: ...
    async def lost(self, error: BaseException) -> None: ...
    async def aclose(self) -> None: ...


def waker_for(pool: Redis, slot_map: SlotMap | None, lane_key: str, block_s: float) -> Waker:
    """The connection a loop claiming from `lane_key` blocks on for up to `block_s`."""
    if slot_map is None:
        return NodeWaker(blocking_client(pool, block_s=block_s), pool)
    kwargs = connection_kwargs(cast(RedisCluster, pool))
    timeout = (kwargs.get("socket_timeout") or 0) + block_s
    return SlotClient(slot_map, kwargs, slot_of(lane_key), socket_timeout=timeout or None)


@dataclass
class NodeWaker:
    """The one Redis's blocking client: nothing to find again after an error."""

    client: Redis
    pool: Redis

    async def get(self) -> Redis:
        return self.client

    async def lost(self, error: BaseException) -> None:
        return None

    async def aclose(self) -> None:
        if self.client is not self.pool:
            with contextlib.suppress(Exception):
                await self.client.aclose()
