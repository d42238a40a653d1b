"""Connecting to Redis: one URL names a single server, a Sentinel-managed master
or a Cluster (wire/redis_url.py has their forms and options).

A Sentinel client asks the sentinels for the master whenever it connects, so
a connection the old master closed or refused (redis-py turns READONLY into a
disconnect) reconnects to the new one. That alone leaves connections on a
demoted master that is still up: Sentinel converts it to a replica (and
closes its clients) only ~10 s after promoting another, and until then it
accepts writes that the promotion has already made lost. So clients made here
also re-ask the sentinels at most once a second while they are in use, and
when the master moved they close every connection of every client of that URL
(the pub/sub and blocking ones included), which then reconnect to the new master.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from typing import Any, cast

import redis
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import SSLConnection
from redis.asyncio.sentinel import MasterNotFoundError, Sentinel, SentinelConnectionPool, SentinelManagedConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from .big_replies import BigReplyParser
from .failures import describe, redis_failure
from .pacing import Backoff
from .redis_url import SentinelURL, is_cluster_url, is_sentinel_url, parse_sentinel_url

log = logging.getLogger(__name__)

MASTER_CHECK_S = 1.0
"""How often a client in use re-asks the sentinels where the master is."""


def _refuse_cluster(url: str) -> None:
    if is_cluster_url(url):
        raise ValueError("a Redis Cluster URL (redis+cluster://) takes a cluster client, and wire format v2: "
                         "use derender_queue.wire.cluster.client_for (as the API, workers and DerenderClient do)")


def async_client(url: str, **options: Any) -> Redis:
    """An asyncio client for `url` (`Redis.from_url`'s options); with a Sentinel
    URL, one that follows the master (module docstring)."""
    _refuse_cluster(url)
    options.setdefault("parser_class", BigReplyParser)
    if not is_sentinel_url(url):
        return cast(Redis, Redis.from_url(url, **options))
    target = parse_sentinel_url(url)
    manager = FollowingSentinel(
        target.sentinels, sentinel_kwargs=_sentinel_kwargs(target, options), **{**target.node, **options})
    return cast(Redis, manager.master_for(target.service, connection_pool_class=FollowingPool))


def sync_client(url: str, **options: Any) -> redis.Redis:
    """A blocking client for `url` (start-up work outside the event loop)."""
    _refuse_cluster(url)
    if not is_sentinel_url(url):
        return redis.Redis.from_url(url, **options)
    from redis.sentinel import Sentinel as SyncSentinel

    target = parse_sentinel_url(url)
    kwargs = {**target.node, **options}
    manager = SyncSentinel(target.sentinels, sentinel_kwargs=_sentinel_kwargs(target, options), **kwargs)  # type: ignore[no-untyped-call]  # redis-py 5 leaves it unannotated
    return cast(redis.Redis, manager.master_for(target.service))  # type: ignore[no-untyped-call]  # as above


def _sentinel_kwargs(target: SentinelURL, options: dict[str, Any]) -> dict[str, Any]:
    # A sentinel that hangs must not hang the client: short timeouts, then the next one.
    timeout = options.get("socket_connect_timeout") or 2.0
    return {"socket_connect_timeout": timeout, "socket_timeout": timeout, **target.sentinel}


def in_memory(client: Redis) -> bool:
    """fakeredis (the embedded default): its connections name an in-memory `server`."""
    pool = getattr(client, "connection_pool", None)  # a RedisCluster has none
    return pool is not None and "server" in pool.connection_kwargs


def sibling_client(client: Redis, **options: Any) -> Redis:
    """Another client of the same server with other options (a pub/sub listener
    without the request timeouts); for a Sentinel master it shares the first
    one's sentinels, so a master change either notices moves both."""
    return Redis.from_pool(copy_pool(client.connection_pool, **options))


def copy_pool(pool: ConnectionPool, **options: Any) -> ConnectionPool:
    """A new pool of the same kind to the same server (`max_connections=1`
    makes the connection of its own a blocking command needs)."""
    kwargs = {k: v for k, v in pool.connection_kwargs.items() if k != "connection_pool"}
    kwargs.setdefault("parser_class", BigReplyParser)  # arq's pools have redis-py's default
    kwargs.update(options, connection_class=pool.connection_class)
    if isinstance(pool, SentinelConnectionPool):
        return type(pool)(pool.service_name, pool.sentinel_manager, is_master=pool.is_master,
                          check_connection=pool.check_connection, **kwargs)
    return type(pool)(**kwargs)


class FollowingSentinel(Sentinel):
    """redis-py's Sentinel, remembering its master pools so that a master
    change seen by one of them moves all of them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]  # redis-py 5 leaves it unannotated
        self.pools: weakref.WeakSet[FollowingPool] = weakref.WeakSet()
        self._next_check = 0.0
        self._checking: asyncio.Task[bool] | None = None

    async def discover_master(self, service_name: str) -> tuple[str, int]:
        """The master the newest configuration names. Every sentinel is asked: one
        that has not heard of a failover yet still names the old master (redis-py
        takes the first answer), which looks sane again once it is back as a replica."""
        asks = [s.sentinel_master(service_name) for s in self.sentinels]  # type: ignore[no-untyped-call]  # as above
        replies = await asyncio.gather(*asks, return_exceptions=True)
        states = [r for r in replies if isinstance(r, dict) and self.check_master_state(r, service_name)]
        if not states:
            errors = "; ".join(repr(r) for r in replies if isinstance(r, BaseException))
            raise MasterNotFoundError(f"No master found for {service_name!r}: {errors or 'none is sane'}")
        newest = max(states, key=lambda state: int(state["config-epoch"]))
        return str(newest["ip"]), int(newest["port"])

    def maybe_check(self) -> None:
        """Start a master check unless one ran in the last MASTER_CHECK_S (never waits)."""
        now = time.monotonic()
        if now >= self._next_check and self._checking is None:
            self._next_check = now + MASTER_CHECK_S
            self._checking = asyncio.get_running_loop().create_task(self.check(), name="sentinel-master-check")
            self._checking.add_done_callback(self._checked)

    def _checked(self, _: asyncio.Task[bool]) -> None:
        self._checking = None

    async def check(self) -> bool:
        """Ask the sentinels where the master is now and move every connection
        that is elsewhere; True if one was moved."""
        pools = list(self.pools)
        if not pools:
            return False
        try:
            address = await self.discover_master(pools[0].service_name)
        except Exception as exc:  # no master known: connections find out by themselves
            if redis_failure(exc):
                log.debug("sentinel master check failed: %s", describe(exc))
            else:
                log.exception("sentinel master check failed")
            return False
        moved = [pool.follow(address) for pool in pools]
        return any(moved)


class FollowingConnection(SentinelManagedConnection):
    """Checks ROLE on connecting: a node the sentinels still name but that is
    a replica by now (demoted, or restarted as one) must not serve reads."""

    async def on_connect(self) -> None:
        await super().on_connect()  # AUTH, SELECT...; before a pub/sub resubscribes on this connection
        if not self.connection_pool.is_master:
            return
        await self.send_command("ROLE")
        try:
            role = (await self.read_response())[0]
        except ResponseError:  # an ACL without ROLE: trust the sentinels
            return
        if role != b"master":
            raise RedisConnectionError(f"{self.host}:{self.port} is not a master ({role.decode()}) yet")


class FollowingSSLConnection(FollowingConnection, SSLConnection):
    pass


class FollowingPool(SentinelConnectionPool):
    """A master pool whose connections follow the sentinels' answer.

    Uses redis-py 5 internals (`_available_connections`, `_in_use_connections`,
    a connection's `_writer`); tests/integration/test_sentinel.py checks this behaviour."""

    def __init__(self, service_name: str, sentinel_manager: FollowingSentinel, **kwargs: Any) -> None:
        tls = kwargs.pop("ssl", False)
        kwargs.setdefault("connection_class", FollowingSSLConnection if tls else FollowingConnection)
        super().__init__(service_name, sentinel_manager, **kwargs)  # type: ignore[no-untyped-call]  # as above
        sentinel_manager.pools.add(self)

    def follow(self, address: tuple[str, int]) -> bool:
        """`address` is the master: close the sockets of connections to any
        other node. Only the socket: whoever uses one now gets a ConnectionError
        and reconnects (redis-py's disconnect would pull the stream from under
        it); an idle one reconnects when it is next taken."""
        if self.master_address not in (None, address):
            log.warning("Redis master moved from %s to %s: reconnecting", self.master_address, address)
        self.master_address = address
        moved = False
        for conn in (*self._available_connections, *self._in_use_connections):
            writer = getattr(conn, "_writer", None)
            if writer is not None and _address(conn) != address:
                writer.transport.abort()
                moved = True
        return moved

    async def get_connection(self, command_name: Any = None, *keys: Any, **options: Any) -> Any:
        self.sentinel_manager.maybe_check()
        conn = await super().get_connection()
        if self.master_address is not None and _address(conn) != self.master_address:
            try:  # connected before the master moved: ours alone, so reconnect it now
                await conn.disconnect()
                await conn.connect()
            except BaseException:
                await self.release(conn)
                raise
        return conn


def _address(conn: Any) -> tuple[str, int]:
    return conn.host, conn.port


async def confirm_master(client: Redis) -> bool:
    """For a Sentinel client: ask the sentinels now and move connections off a
    demoted master; True if any moved (so what was just read may be stale:
    read it again). Between a promotion and the next periodic check, a read
    can reach the old master, which lacks what was written to the new one."""
    pool = getattr(client, "connection_pool", None)  # a RedisCluster has none (it follows MOVED)
    return isinstance(pool, FollowingPool) and await pool.sentinel_manager.check()


async def first_ping(client: Redis, attempts: int = 6, delay_s: float = 0.5) -> Redis:
    """`client` once it answered PING, retrying with backoff as arq's
    create_pool retries: Redis or its sentinels may still be starting (compose, k8s)."""
    backoff = Backoff(delay_s)
    for attempt in range(attempts):
        try:
            await client.ping()
            return client
        except Exception as exc:
            if attempt == attempts - 1 or not redis_failure(exc):
                raise
            delay = backoff.next_s()
            log.warning("waiting for Redis (%s); again in %.1f s", describe(exc), delay)
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")
