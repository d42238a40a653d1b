"""A claim loop's own connection for its blocking claim (worker/lane_server.py):
to the one Redis, or on a Redis Cluster to the master serving its shard's
slot, found again when the slot moves or its master fails over."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Protocol, cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from derender_queue.wire.cluster import SlotClient, SlotMap, connection_kwargs, slot_of
from derender_queue.wire.connection import blocking_client


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
