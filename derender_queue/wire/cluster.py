"""Redis Cluster clients for wire format v2 (docs/cluster-client.md): the
cluster client of a `redis+cluster://` URL, node-addressed clients, the slot
map, and the shards' hash tags.

redis-py 5's async `RedisCluster` routes each command by its keys' slot and
follows MOVED/ASK, which is what Lua scripts and pipelines need. Two things it
does badly or not at all are done on a plain `redis.asyncio.Redis` to the node
that serves a slot instead:

- blocking claims (BLMOVE): through `RedisCluster` a blocked command holds one
  of the node's pooled connections, and a connection error or timeout on any
  node, or every 5th MOVED, makes the client close every connection of every
  node, blocked ones included (tests/wire/test_cluster_client.py);
- sharded pub/sub (SSUBSCRIBE): redis-py 5 has none in asyncio
  (derender_queue/wire/sharded_pubsub.py).

A node client keeps the cluster client's credentials, TLS and timeouts, and
its parser: a redirection arrives as `MovedError`/`AskError` (with the slot
and the new address) rather than as a bare `ResponseError`. Where slots are
is read with CLUSTER SLOTS by `SlotMap`, on its own short connections: asking
`RedisCluster` to re-read its map would close its connections in use.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
from collections.abc import Callable, Iterable
from typing import Any, cast

import redis
import redis.cluster
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MovedError

from .connection import async_client, sync_client
from .failures import describe, redis_failure
from .redis_url import is_cluster_url, parse_cluster_url

log = logging.getLogger(__name__)

Address = tuple[str, int]
_CLUSTER_ONLY = {"response_callbacks", "max_connections"}
"""Connection arguments of a cluster client that a plain pool does not take."""


CLUSTER_RETRIES = {"cluster_error_retry_attempts": 1}
"""redis-py 5's RedisCluster sends a command again after a timeout or a lost
connection, when it may have run already: a write then runs twice (three
retries, its default: four times). A pipeline is tried this many times in all
(0 breaks it: UnboundLocalError), a single command once more than this. So 1:
pipelines (submit) run at most once, single commands at most twice, which
v2's scripts survive (each is fenced: a second `finish` finds no active
value); BLMOVE, which does not, goes on node clients (tests/wire/test_cluster_client.py)."""


def cluster_client(url: str, **options: Any) -> RedisCluster:
    """An asyncio RedisCluster for a `redis+cluster://` URL; `options` are
    RedisCluster's and win over the URL's. Connects on first use."""
    return cast(RedisCluster, RedisCluster(**_cluster_arguments(url, ClusterNode, options)))


def client_for(url: str, **options: Any) -> Redis:
    """The asyncio client of any Redis URL: a RedisCluster for `redis+cluster://`
    (typed as Redis: it takes the same single-slot commands; the code that must
    differ asks `is_cluster`), else `connection.async_client`."""
    if is_cluster_url(url):
        return cast(Redis, cluster_client(url, **options))
    return async_client(url, **options)


def sync_client_for(url: str, **options: Any) -> redis.Redis:
    """The blocking client of any Redis URL (start-up work outside the event
    loop): a blocking RedisCluster (typed as Redis, as in `client_for`) for
    `redis+cluster://`, else `connection.sync_client`."""
    if is_cluster_url(url):
        cluster = redis.cluster.RedisCluster(**_cluster_arguments(url, redis.cluster.ClusterNode, options))
        return cast(redis.Redis, cluster)
    return sync_client(url, **options)


def _cluster_arguments(url: str, node: Callable[[str, int], Any], options: dict[str, Any]) -> dict[str, Any]:
    """RedisCluster's arguments for a `redis+cluster://` URL: its nodes as
    startup nodes (of the client's `node` class), the URL's options, `options`."""
    target = parse_cluster_url(url)
    startup = [node(host, port) for host, port in target.nodes]
    return {"startup_nodes": startup, **CLUSTER_RETRIES, **target.options, **options}


def slot_of(key: str | bytes) -> int:
    """The key's hash slot (CRC16 of its `{tag}` if it has one, modulo 16384)."""
    return int(key_slot(key.encode() if isinstance(key, str) else key))


SHARD = "s0"
"""The one shard of a single Redis (and of a Sentinel-managed one)."""
CLUSTER_SHARDS = 16
"""A Redis Cluster's shards by default (DERENDER_SHARDS): more than masters,
so that resharding can move load in steps of one shard."""


def is_cluster(redis: Redis) -> bool:
    """A Redis Cluster client: its jobs spread over many shards."""
    return isinstance(redis, RedisCluster)


def tags_for(redis: Redis, shards: int = CLUSTER_SHARDS) -> tuple[str, ...]:
    """The shards' hash tags: one ("s0") on a single Redis, `shards` on a cluster."""
    return shard_tags(shards) if is_cluster(redis) else (SHARD,)


MAX_SHARDS = 256
"""More shards than masters lets resharding move load; past a few hundred the tags take long to find."""
TAG_CANDIDATES = 1024


@functools.cache
def shard_tags(shards: int) -> tuple[str, ...]:
    """The hash tags of `shards` shards: "s0" alone; else shard i takes, of
    "s{i}-{k}" for k < 1024 (or on until one fits), the tag whose slot lies
    in the i-th of `shards` equal slot ranges, nearest its middle. Any even
    split of the slot space over masters (as `redis-cli --cluster create`
    makes) then gives every master an even share, within one shard: a shard
    straddling two masters' ranges goes to the one holding most of it
    (tests/wire/test_cluster_client.py; docs/cluster-client.md)."""
    if not 1 <= shards <= MAX_SHARDS:
        raise ValueError(f"shards must be 1..{MAX_SHARDS}, not {shards}")
    if shards == 1:
        return (SHARD,)
    return tuple(_middle_tag(i, shards) for i in range(shards))


def _middle_tag(i: int, shards: int) -> str:
    low, high = i * REDIS_CLUSTER_HASH_SLOTS // shards, (i + 1) * REDIS_CLUSTER_HASH_SLOTS // shards
    middle = (low + high - 1) / 2
    best: tuple[float, str] | None = None
    for k in itertools.count():
        if k >= TAG_CANDIDATES and best is not None:
            return best[1]
        tag = f"s{i}-{k}"
        slot = slot_of(tag)
        if low <= slot < high and (best is None or abs(slot - middle) < best[0]):
            best = (abs(slot - middle), tag)
    raise AssertionError("unreachable")


def connection_kwargs(cluster: RedisCluster) -> dict[str, Any]:
    """The cluster client's per-connection arguments, for plain node clients."""
    return {k: v for k, v in cluster.get_connection_kwargs().items() if k not in _CLUSTER_ONLY}


def node_client(kwargs: dict[str, Any], address: Address, **options: Any) -> Redis:
    """A plain client of one node with `kwargs` (`connection_kwargs(cluster)`);
    `options` override them (`max_connections=1` for a connection of one's own)."""
    pool = ConnectionPool(**{**kwargs, "host": address[0], "port": address[1], **options})
    return Redis.from_pool(pool)


class SlotMap:
    """slot -> the master serving it, read with CLUSTER SLOTS from any node that answers."""

    def __init__(self, kwargs: dict[str, Any], seeds: Iterable[Address], timeout_s: float = 2.0) -> None:
        # Short timeouts: a node that hangs (a paused VM) must not hold up finding the others.
        self.kwargs = {**kwargs, "socket_timeout": timeout_s, "socket_connect_timeout": timeout_s}
        self.seeds = list(dict.fromkeys(seeds))
        self.masters: list[Address | None] = [None] * REDIS_CLUSTER_HASH_SLOTS
        self.answered: Address | None = None
        """The node that answered last: asked first next time."""

    @classmethod
    def of(cls, cluster: RedisCluster, **options: Any) -> SlotMap:
        """A map seeded with the cluster client's nodes (and its startup nodes)."""
        nodes = [*cluster.nodes_manager.nodes_cache.values(), *cluster.nodes_manager.startup_nodes.values()]
        return cls(connection_kwargs(cluster), [(str(n.host), int(n.port)) for n in nodes], **options)

    def ask_first(self, address: Address) -> None:
        """The next `load` asks `address` before any other node."""
        self.answered = address
        self.seeds = list(dict.fromkeys([*self.seeds, address]))

    async def load(self) -> bool:
        """Re-read the map from the first node that answers (the last one that
        did, then known masters, then every node seen); False if none did."""
        known = [a for a in dict.fromkeys(self.masters) if a is not None]
        first = [self.answered] if self.answered else []
        for address in dict.fromkeys([*first, *known, *self.seeds]):
            client = node_client(self.kwargs, address, max_connections=1)
            try:
                ranges = await client.execute_command("CLUSTER SLOTS")  # type: ignore[no-untyped-call]  # redis-py 5 leaves it unannotated
            except Exception as exc:  # of any type (wire/failures.py): uvloop's RuntimeError, on a transport gone
                if not redis_failure(exc):
                    raise
                log.debug("CLUSTER SLOTS on %s:%s failed: %s", *address, describe(exc))
                continue
            finally:
                with contextlib.suppress(Exception):  # a transport already gone: uvloop's RuntimeError
                    await client.aclose()
            self._apply(ranges, address[0])
            self.answered = address
            return True
        return False

    def _apply(self, ranges: list[Any], asked: str) -> None:
        masters: list[Address | None] = [None] * REDIS_CLUSTER_HASH_SLOTS
        for start, end, master, *replicas in ranges:
            host = text(master[0]) or asked  # a node that does not know its address says ""
            masters[int(start):int(end) + 1] = [(host, int(master[1]))] * (int(end) - int(start) + 1)
            self.seeds += [(text(r[0]) or asked, int(r[1])) for r in (master, *replicas)]
        self.seeds = list(dict.fromkeys(self.seeds))
        self.masters = masters


def text(value: Any) -> str:
    """A reply field as text (bytes or not)."""
    return value.decode() if isinstance(value, bytes) else str(value)


class SlotClient:
    """A client of its own (one connection) to the master that serves one slot,
    for a blocking claim, which must not go through RedisCluster (module
    docstring). Found again after MOVED (the slot moved) or any other error
    (its master may have died and a replica taken over)."""

    def __init__(self, slots: SlotMap, kwargs: dict[str, Any], slot: int, **options: Any) -> None:
        self.slots, self.kwargs, self.slot, self.options = slots, kwargs, slot, options
        self._client: Redis | None = None

    async def get(self) -> Redis:
        if self._client is None:
            address = self.slots.masters[self.slot]
            if address is None and await self.slots.load():
                address = self.slots.masters[self.slot]
            if address is None:
                raise RedisConnectionError(f"no master serves slot {self.slot} now")
            self._client = node_client(self.kwargs, address, max_connections=1, **self.options)
        return self._client

    async def lost(self, error: BaseException) -> None:
        """Drop the connection after `error`; MOVED names the slot's new master,
        anything else has the map read again."""
        await self.aclose()
        if isinstance(error, MovedError):
            self.slots.masters[self.slot] = (str(error.host), int(error.port))
        else:
            await self.slots.load()

    async def aclose(self) -> None:
        """Never raises: closing a connection whose transport is gone can (uvloop's
        RuntimeError), and this runs in the claim loop's error handling."""
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.aclose()


def quiet_replaced_nodes(loop: asyncio.AbstractEventLoop) -> None:
    """When RedisCluster re-reads the slot map it replaces its node objects; a
    node replaced while a command held one of its connections is collected
    with that connection open, and redis-py reports it to asyncio's exception
    handler ("Unclosed ClusterNode object", 8-12 lines per failover). The
    connection closes as it is collected: on a cluster whose nodes move this
    is expected, so it is logged at debug level; anything else goes on to the
    handler there was."""
    previous = loop.get_exception_handler()
    if getattr(previous, "quiet_replaced_nodes", False):
        return

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if isinstance(context.get("client"), ClusterNode):
            log.debug("a replaced cluster node was collected with a connection open: %s", context["client"])
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    handler.quiet_replaced_nodes = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)
