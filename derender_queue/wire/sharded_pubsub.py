"""Sharded pub/sub (SSUBSCRIBE) over a Redis Cluster with redis-py 5.

redis-py 5's asyncio client has no SSUBSCRIBE (its async `PubSub` lacks it and
the async `RedisCluster` has no pub/sub at all; both came in redis-py 8), so
this keeps one plain connection per master that serves a subscribed shard
channel's slot, sends SSUBSCRIBE on it, and reads its messages.

A channel's subscription moves when its slot does:
- the slot migrated, or the master was demoted by a failover it took part in:
  the node sends an SUNSUBSCRIBE we did not ask for;
- the master died: its connection breaks (or stops answering the health PING);
- our slot map was stale: SSUBSCRIBE is answered MOVED.
Each case re-reads the slot map (CLUSTER SLOTS) and subscribes again at the
master serving the slot now, retrying with backoff while the cluster has none.

Messages published while a channel was moving are lost (pub/sub keeps no
history): once it is subscribed again, `on_resubscribed(channel)` is called so
the reader can look for what it missed (the result waiter's poll).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import MovedError, RedisError, ResponseError

from .background import keep_running, spawn
from .cluster import Address, SlotMap, connection_kwargs, slot_of, text
from .failures import describe, ignoring_redis_failures, redis_failure
from .pacing import Backoff

log = logging.getLogger(__name__)

Message = tuple[str, bytes]
"""(shard channel, payload)"""


@dataclass
class _Channel:
    name: str
    slot: int
    link: _Link | None = None
    """Where it is subscribed, or being subscribed."""
    live: asyncio.Event = field(default_factory=asyncio.Event)
    """Set while the node has confirmed the subscription."""
    lost: bool = False
    """Was live, and then was not: messages may have been missed."""
    error: RedisError | None = None
    """The node refused it for good (an ACL without the channel, say)."""


class _Link:
    """One connection to one master: the channels subscribed there, and the
    SSUBSCRIBE replies still owed, by channel name (replies come in command
    order, messages between them)."""

    def __init__(self, owner: ShardedSubscriber, address: Address) -> None:
        self.owner = owner
        self.address = address
        self.channels: dict[str, _Channel] = {}
        self.owed: deque[str] = deque()
        kwargs = {k: v for k, v in owner.kwargs.items() if k != "connection_class"}
        # No read timeout (it waits for messages), no automatic health check (it would
        # read a reply from under the reader: the link PINGs by itself), bytes not text.
        self.conn: AbstractConnection = owner.kwargs["connection_class"](
            **{**kwargs, "host": address[0], "port": address[1], "socket_timeout": None,
               "health_check_interval": 0, "decode_responses": False})
        self.reader: asyncio.Task[None] | None = None
        self.pongs = 0
        self.closed = False

    async def start(self) -> None:
        # Bounded: a paused node accepts the TCP connection and never answers the handshake.
        await asyncio.wait_for(self.conn.connect(), self.owner.health_s)  # type: ignore[no-untyped-call]  # redis-py 5 leaves it unannotated
        self.reader = asyncio.create_task(self._read(), name=f"ssubscribe-{self.address[0]}:{self.address[1]}")

    async def ping(self) -> None:
        await self.conn.send_command("PING", check_health=False)

    async def _read(self) -> None:
        try:
            while True:
                try:
                    reply = await self.conn.read_response()
                except ResponseError as exc:  # an error reply; the connection is fine
                    self._refused(exc)
                    continue
                self._dispatch(reply)
        except Exception as exc:  # of any type: the link is gone, its channels are placed again
            if not self.closed:
                if redis_failure(exc):
                    log.warning("shard channel connection to %s:%s lost: %s", *self.address, describe(exc))
                else:
                    log.exception("shard channel reader of %s:%s failed", *self.address)
                self.owner._link_lost(self)

    def _refused(self, error: ResponseError) -> None:
        """SSUBSCRIBE answered with an error: MOVED when our slot map was
        stale (place it again), anything else for good."""
        if not self.owed:
            log.warning("unexpected error from %s:%s: %s", *self.address, error)
            return
        name = self.owed.popleft()
        channel = self.channels.pop(name, None)
        if channel is None:
            return
        if isinstance(error, MovedError):
            self.owner._move(channel, ask=(str(error.host), int(error.port)))
        else:
            log.error("%s:%s refused shard channel %s: %s", *self.address, name, error)
            self.owner._failed(channel, error)

    def _dispatch(self, reply: Any) -> None:
        if not isinstance(reply, list):  # +PONG: a connection with no subscription (yet, or left)
            self.pongs += reply == b"PONG"
            return
        kind = bytes(reply[0])
        if kind == b"smessage":
            self.owner.messages.put_nowait((text(reply[1]), bytes(reply[2])))
        elif kind == b"pong":
            self.pongs += 1
        elif kind == b"ssubscribe":
            if self.owed:
                self.owed.popleft()
            channel = self.channels.get(text(reply[1]))
            if channel is not None:
                self.owner._confirmed(channel)
        elif kind == b"sunsubscribe":  # never asked for: the slot left this node
            channel = self.channels.pop(text(reply[1]), None)
            if channel is not None:
                self.owner._move(channel, ask=self.address)

    async def close(self) -> None:
        self.closed = True
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.reader
        with contextlib.suppress(Exception):  # a transport already gone: uvloop's RuntimeError
            await self.conn.disconnect(nowait=True)


class ShardedSubscriber:
    """SSUBSCRIBE to shard channels wherever their slots are served, following
    them when they move (module docstring).

        subscriber = ShardedSubscriber.of(cluster, on_resubscribed=poll)
        await subscriber.subscribe("{p}:{s0-3}:done:api-1", ...)  # once confirmed
        async for channel, payload in subscriber: ...
        await subscriber.aclose()
    """

    def __init__(self, slots: SlotMap, kwargs: dict[str, Any],
                 on_resubscribed: Callable[[str], None] | None = None,
                 on_error: Callable[[str], None] = lambda _: None,
                 retry_s: float = 0.1, max_retry_s: float = 2.0, health_s: float = 5.0) -> None:
        self.slots = slots
        self.kwargs = kwargs
        self.on_resubscribed = on_resubscribed
        self.on_error = on_error
        """Called with a background task's name when it survives an error (wire/background.py)."""
        self.retry_s, self.max_retry_s, self.health_s = retry_s, max_retry_s, health_s
        self.channels: dict[str, _Channel] = {}
        self.links: dict[Address, _Link] = {}
        self.messages: asyncio.Queue[Message] = asyncio.Queue()
        self._wanted = asyncio.Event()
        self._resolver: asyncio.Task[None] | None = None
        self._health: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()

    @classmethod
    def of(cls, cluster: RedisCluster, **options: Any) -> ShardedSubscriber:
        """One with the cluster client's nodes and connection arguments
        (credentials, TLS); it never uses the cluster client's connections."""
        return cls(SlotMap.of(cluster, timeout_s=options.get("health_s", 5.0)), connection_kwargs(cluster), **options)

    # ---------------------------------------------------------------- API

    async def subscribe(self, *names: str) -> None:
        """Subscribe; returns once every channel's master has confirmed (raises
        the error of one a node refused for good, which is dropped)."""
        wanted = [self.channels.setdefault(name, _Channel(name, slot_of(name))) for name in names]
        self._start()
        self._wanted.set()
        await asyncio.gather(*(channel.live.wait() for channel in wanted))
        errors = [channel.error for channel in wanted if channel.error is not None]
        if errors:  # those channels are dropped already (_failed)
            raise errors[0]

    async def __aiter__(self) -> AsyncIterator[Message]:
        while True:
            yield await self.messages.get()

    def where(self) -> dict[Address, set[str]]:
        """Which channels are confirmed at which master (for tests and status)."""
        return {a: {n for n, c in link.channels.items() if c.live.is_set()} for a, link in self.links.items()}

    async def aclose(self) -> None:
        for task in (self._resolver, self._health):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._resolver = self._health = None
        for link in list(self.links.values()):
            await link.close()
        self.links.clear()
        await asyncio.gather(*self._closing, return_exceptions=True)

    # ---------------------------------------------------------------- following the slots

    def _start(self) -> None:
        if self._resolver is None:
            self._resolver = keep_running("ssubscribe-resolver", self._resolve_forever, self.on_error)
            self._health = keep_running("ssubscribe-health", self._ping_forever, self.on_error)

    def _move(self, channel: _Channel, ask: Address | None = None) -> None:
        """The channel is no longer subscribed where it was: place it again.
        `ask`: a node that knows where the slot went (the one that dropped it, or the
        one a MOVED named), asked for the slot map first. Another node may not have
        heard of the change yet, and a demoted master still accepts SSUBSCRIBE as a
        replica, so a stale map would leave the channel on a replica for good."""
        if ask is not None:
            self.slots.ask_first(ask)
        if channel.live.is_set():
            channel.lost = True
        channel.live.clear()
        channel.link = None
        self._wanted.set()

    def _failed(self, channel: _Channel, error: RedisError) -> None:
        channel.error = error
        channel.link = None
        self.channels.pop(channel.name, None)
        channel.live.set()  # wakes subscribe(), which raises it

    def _confirmed(self, channel: _Channel) -> None:
        channel.live.set()
        if channel.lost:
            channel.lost = False
            if self.on_resubscribed is not None:
                self.on_resubscribed(channel.name)

    def _link_lost(self, link: _Link) -> None:
        if self.links.get(link.address) is link:
            del self.links[link.address]
        for channel in link.channels.values():
            self._move(channel)
        link.channels.clear()
        spawn(link.close(), "ssubscribe-close", None, self._closing)

    async def _resolve_forever(self) -> None:
        """Place unplaced channels whenever some are; at most one round per
        `retry_s` (a MOVED from a node that has not heard of a change yet must
        not spin), backing off to `max_retry_s` while some have no master."""
        backoff = Backoff(self.retry_s, self.max_retry_s)
        self._wanted.set()  # (again, after an error) look at every channel
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            if await self._place_all():
                backoff.reset()
                await asyncio.sleep(self.retry_s)
            else:
                self._wanted.set()
                await backoff.wait()

    async def _place_all(self) -> bool:
        """Subscribe every unplaced channel at its slot's master; False if some could not be."""
        unplaced = [c for c in self.channels.values() if c.link is None]
        if not unplaced:
            return True
        if not await self.slots.load():
            log.warning("no cluster node answered CLUSTER SLOTS; retrying")
            return False
        done = True
        for channel in unplaced:
            if self.channels.get(channel.name) is not channel:
                continue  # refused for good meanwhile
            address = self.slots.masters[channel.slot]
            if address is None:  # the slot has no master (a failover under way)
                done = False
                continue
            try:
                link = await self._link(address)
                link.channels[channel.name] = channel
                channel.link = link
                link.owed.append(channel.name)
                await link.conn.send_command("SSUBSCRIBE", channel.name, check_health=False)
            except Exception as exc:
                if not redis_failure(exc):
                    raise
                log.warning("cannot subscribe %s at %s:%s: %s", channel.name, *address, describe(exc))
                self._drop(address)
                done = False
        for address, link in list(self.links.items()):
            if not link.channels:  # every channel there moved or was refused
                del self.links[address]
                await link.close()
        return done

    async def _link(self, address: Address) -> _Link:
        link = self.links.get(address)
        if link is None:
            link = _Link(self, address)
            try:
                await link.start()
            except BaseException:
                await link.close()
                raise
            self.links[address] = link
        return link

    def _drop(self, address: Address) -> None:
        link = self.links.get(address)
        if link is not None:
            self._link_lost(link)
        for channel in self.channels.values():
            if channel.link is not None and channel.link.address == address:
                self._move(channel)

    async def _ping_forever(self) -> None:
        """A master that stops answering (a partition, a paused VM) gives no
        connection error: a link without a PONG for a whole interval is dropped."""
        while True:
            sent = {a: link.pongs for a, link in self.links.items()}
            for link in list(self.links.values()):
                with ignoring_redis_failures():
                    await link.ping()
            await asyncio.sleep(self.health_s)
            for address, pongs in sent.items():
                current = self.links.get(address)
                if current is not None and current.pongs == pongs:
                    log.warning("shard channel connection to %s:%s stopped answering", *address)
                    self._link_lost(current)
