"""Connecting to Redis: one URL names a single server, a Sentinel-managed master or a Cluster.

    redis://[USER:PASSWORD@]HOST:PORT/DB          one server (rediss:// for TLS)
    redis+sentinel://[USER:PASSWORD@]H1:P1,H2:P2,.../MASTER[/DB][?sentinel_password=...]
    rediss+sentinel://...                         TLS to the sentinels and the master
    redis+cluster://[USER:PASSWORD@]H1:P1,H2:P2,...[/][?...]   a Redis Cluster: any of its
                                                  nodes (rediss+cluster:// for TLS); only
                                                  wire/cluster.py's clients take it

USER:PASSWORD authenticate to the master (an ACL user, as in redis://); the
sentinels' own credentials are the `sentinel_username` / `sentinel_password`
query parameters. Other query parameters are redis-py's (`socket_timeout`,
`ssl_ca_certs`, ...) and apply to the master's connections.

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
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, parse_qs, unquote, urlsplit

import redis
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import URL_QUERY_ARGUMENT_PARSERS, SSLConnection
from redis.asyncio.sentinel import MasterNotFoundError, Sentinel, SentinelConnectionPool, SentinelManagedConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from .big_replies import BigReplyParser
from .failures import describe, redis_failure
from .pacing import Backoff

log = logging.getLogger(__name__)

SENTINEL_SCHEMES = {"redis+sentinel": False, "rediss+sentinel": True}
"""Scheme -> TLS."""
SENTINEL_PORT = 26379
CLUSTER_SCHEMES = {"redis+cluster": False, "rediss+cluster": True}
"""Scheme -> TLS."""
REDIS_PORT = 6379
CLUSTER_OPTIONS: dict[str, Any] = {
    **{name: parser for name, parser in URL_QUERY_ARGUMENT_PARSERS.items() if name not in ("db", "retry_on_timeout")},
    "ssl_ca_certs": str, "ssl_certfile": str, "ssl_keyfile": str, "ssl_cert_reqs": str,
    "require_full_coverage": URL_QUERY_ARGUMENT_PARSERS["ssl_check_hostname"],  # a boolean
    "reinitialize_steps": int, "cluster_error_retry_attempts": int, "connection_error_retry_attempts": int,
}
"""Query parameters a cluster URL takes: RedisCluster's, each with its parser."""
MASTER_CHECK_S = 1.0
"""How often a client in use re-asks the sentinels where the master is."""
_SENTINEL_AUTH = {"sentinel_username": "username", "sentinel_password": "password"}


@dataclass(frozen=True)
class SentinelURL:
    sentinels: tuple[tuple[str, int], ...]
    service: str
    """The master's name in the sentinels' configuration (`sentinel monitor NAME ...`)."""
    node: dict[str, Any] = field(default_factory=dict)
    """Connection arguments for the master: db, credentials, TLS, redis-py options."""
    sentinel: dict[str, Any] = field(default_factory=dict)
    """Connection arguments for the sentinels: their credentials and TLS."""


def is_sentinel_url(url: str) -> bool:
    return url.partition("://")[0].lower() in SENTINEL_SCHEMES


def parse_sentinel_url(url: str) -> SentinelURL:
    """`redis+sentinel://[U:P@]H1:P1,H2:P2/MASTER[/DB][?...]`; ValueError saying what is wrong."""
    parts, tls, sentinels, node = _split_url(
        url, SENTINEL_SCHEMES, "Sentinel", SENTINEL_PORT, "sentinel: redis+sentinel://HOST:PORT,.../MASTER")
    path = [unquote(p) for p in parts.path.split("/")[1:]]
    if not path or not path[0] or len(path) > 2:
        raise ValueError("a Sentinel URL's path is /MASTER or /MASTER/DB (the name in `sentinel monitor`)")
    node["db"] = _int(path[1], "database") if len(path) == 2 and path[1] else 0
    sentinel: dict[str, Any] = {}
    for name, values in parse_qs(parts.query).items():
        if name in _SENTINEL_AUTH:
            sentinel[_SENTINEL_AUTH[name]] = values[0]
        else:
            node[name] = _option(name, URL_QUERY_ARGUMENT_PARSERS.get(name, str), values[0])
    if tls:
        node["ssl"] = True
        sentinel.update(ssl=True, **{k: v for k, v in node.items() if k.startswith("ssl_")})
    return SentinelURL(sentinels, path[0], node, sentinel)


def _split_url(url: str, schemes: dict[str, bool], kind: str, default_port: int,
               example: str) -> tuple[SplitResult, bool, tuple[tuple[str, int], ...], dict[str, Any]]:
    """A Sentinel or Cluster URL's parts, whether it is TLS, its addresses
    and its credentials; ValueError saying what is wrong (`example`: what
    it names at least one of, and how)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in schemes:
        raise ValueError(f"not a {kind} URL ({' or '.join(f'{s}://' for s in schemes)}): {scheme}://")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    addresses = tuple(_host_port(item, default_port) for item in hosts.split(",") if item.strip())
    if not addresses:
        raise ValueError(f"a {kind} URL names at least one {example}")
    credentials: dict[str, Any] = {}
    user, has_password, password = userinfo.partition(":")
    if user:
        credentials["username"] = unquote(user)
    if has_password:
        credentials["password"] = unquote(password)
    return parts, schemes[scheme], addresses, credentials


def _option(name: str, parser: Any, value: str) -> Any:
    try:
        return parser(value)
    except (TypeError, ValueError):
        raise ValueError(f"invalid value for {name!r} in the Redis URL") from None


def _host_port(item: str, default_port: int) -> tuple[str, int]:
    item = item.strip()
    if item.startswith("["):  # [IPv6]:port
        host, _, rest = item[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = item.partition(":")
    if not host:
        raise ValueError(f"an address without a host: {item!r}")
    return unquote(host), _int(port, "port") if port else default_port


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"the {what} in the Redis URL is not a number: {text!r}") from None


@dataclass(frozen=True)
class ClusterURL:
    nodes: tuple[tuple[str, int], ...]
    """Where to ask for the cluster's layout: any of its nodes, one is enough."""
    options: dict[str, Any] = field(default_factory=dict)
    """RedisCluster's arguments: credentials, TLS, redis-py options."""


def is_cluster_url(url: str) -> bool:
    return url.partition("://")[0].lower() in CLUSTER_SCHEMES


def parse_cluster_url(url: str) -> ClusterURL:
    """`redis+cluster://[U:P@]H1:P1,H2:P2[/][?...]`; ValueError saying what is wrong."""
    parts, tls, nodes, options = _split_url(
        url, CLUSTER_SCHEMES, "Cluster", REDIS_PORT, "node: redis+cluster://HOST:PORT,...")
    if parts.path.strip("/") not in ("", "0"):
        raise ValueError("a Redis Cluster has only database 0: leave the path out (or /0)")
    for name, values in parse_qs(parts.query).items():
        if name not in CLUSTER_OPTIONS:
            raise ValueError(f"a Cluster URL does not take {name!r} (it takes {', '.join(sorted(CLUSTER_OPTIONS))})")
        options[name] = _option(name, CLUSTER_OPTIONS[name], values[0])
    if tls:
        options["ssl"] = True
    return ClusterURL(nodes, options)


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
        plain: Redis = Redis.from_url(url, **options)
        return plain
    target = parse_sentinel_url(url)
    manager = FollowingSentinel(
        target.sentinels, sentinel_kwargs=_sentinel_kwargs(target, options), **{**target.node, **options})
    client: Redis = manager.master_for(target.service, connection_pool_class=FollowingPool)
    return client


def sync_client(url: str, **options: Any) -> redis.Redis:
    """A blocking client for `url` (start-up work outside the event loop)."""
    _refuse_cluster(url)
    if not is_sentinel_url(url):
        return redis.Redis.from_url(url, **options)
    from redis.sentinel import Sentinel as SyncSentinel

    target = parse_sentinel_url(url)
    kwargs = {**target.node, **options}
    manager = SyncSentinel(target.sentinels, sentinel_kwargs=_sentinel_kwargs(target, options), **kwargs)  # type: ignore[no-untyped-call]  # redis-py 5 leaves it unannotated
    client: redis.Redis = manager.master_for(target.service)  # type: ignore[no-untyped-call]  # as above
    return client


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
