"""Streams' held text in Redis: the I/O of core/parsers/spill.py's `Spill`.

A worker runs a chunk's CPU work with the keys it fetched, then writes what
the work appended before the answer goes out (so the state it answers with
never refers to text that is not stored yet).  SETRANGE at the offset the
state recorded makes a retried chunk's write the same write.  Every write
and read sets the key's expiry (DERENDER_HELD_TEXT_TTL_S); a stream that
ended leaves its keys a minute, so a retried last chunk still reads them.
"""

from __future__ import annotations

from collections.abc import Iterable

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from .keys import Keys

ENDED_TTL_MS = 60_000
Write = tuple[bytes, int, bytes]


class HeldTextStore:
    def __init__(self, redis: Redis | RedisCluster, keys: Keys, ttl_ms: int) -> None:
        self.redis, self.keys, self.ttl_ms = redis, keys, ttl_ms

    async def fetch(self, keys: Iterable[bytes]) -> dict[bytes, bytes]:
        """Each key's text (b"" for one that is gone)."""
        wanted = list(keys)
        pipe = self.redis.pipeline(transaction=False)
        for key in wanted:
            name = self.keys.held(key)
            pipe.get(name)
            pipe.pexpire(name, self.ttl_ms)
        replies = await pipe.execute()
        return {key: replies[2 * i] or b"" for i, key in enumerate(wanted)}

    async def save(self, writes: list[Write], ended: list[bytes]) -> None:
        if not writes and not ended:
            return
        pipe = self.redis.pipeline(transaction=False)
        for key, offset, data in writes:
            name = self.keys.held(key)
            pipe.setrange(name, offset, data)
            pipe.pexpire(name, self.ttl_ms)
        for key in ended:
            pipe.pexpire(self.keys.held(key), ENDED_TTL_MS)
        await pipe.execute()
