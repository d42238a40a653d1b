"""The sharded subscriber prototype (derender_queue/wire/sharded_pubsub.py):
SSUBSCRIBE over a local Redis Cluster with redis-py 5, one connection per
master, following its channels' slots through a migration, a manual failover,
a killed master, a paused master and a stale slot map (issue 17; the spike is
tests/wire/test_cluster_client.py, the write-up docs/cluster-client.md)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from redis.exceptions import NoPermissionError

from derender_queue.wire.cluster import SlotMap, cluster_client, connection_kwargs, shard_tags, slot_of
from derender_queue.wire.sharded_pubsub import ShardedSubscriber
from tests.helpers.redis_cluster import HOST, until

SPUBLISH = "return redis.call('SPUBLISH', KEYS[1], ARGV[1])"
"""As v2's `finish` announces a result: from a script, on the job's shard."""


def channels(prefix: str, shards: int = 16) -> list[str]:
    return [f"{prefix}:{{{tag}}}:done:api-1" for tag in shard_tags(shards)]


@contextlib.asynccontextmanager
async def subscriber(url: str, **options):
    client = cluster_client(url)
    await client.initialize()
    sub = ShardedSubscriber.of(client, **options)
    try:
        yield client, sub
    finally:
        await sub.aclose()
        await client.aclose()


async def publish(client, channel: str, payload: str) -> int:
    return int(await client.eval(SPUBLISH, 1, channel, payload))


async def received(sub: ShardedSubscriber, count: int, timeout: float = 10.0) -> set[tuple[str, bytes]]:
    out = set()
    for _ in range(count):
        try:
            out.add(await asyncio.wait_for(anext(aiter(sub)), timeout))
        except TimeoutError:
            raise AssertionError(f"only {len(out)} of {count} messages arrived: {sorted(out)}") from None
    return out


async def test_one_connection_per_master_and_every_shard_arrives(redis_cluster, prefix):
    names = channels(prefix)
    async with subscriber(redis_cluster.url) as (client, sub):
        await sub.subscribe(*names)
        where = sub.where()
        assert sorted(port for _, port in where) == sorted(redis_cluster.masters())
        for (_, port), subscribed in where.items():
            assert subscribed == {n for n in names if redis_cluster.owner(slot_of(n)) == port}
        for name in names:
            assert await publish(client, name, name) == 1
        assert await received(sub, 16) == {(name, name.encode()) for name in names}


async def test_a_node_that_refuses_a_channel_raises_it(redis_cluster, prefix):
    """An ACL without the channel: NOPERM, for good (no reconnect loop)."""
    user, password = f"{prefix}-user", "a-long-password-1"
    allowed, refused = channels(prefix)[0], channels(f"{prefix}x")[0]
    for port in redis_cluster.live_ports():
        with redis_cluster.client(port) as node:
            node.acl_setuser(user, enabled=True, passwords=[f"+{password}"], keys=["*"],
                             channels=[f"{prefix}:*"], commands=["+@all"])
    try:
        async with subscriber(redis_cluster.url.replace("redis+cluster://", f"redis+cluster://{user}:{password}@"),
                              health_s=1.0) as (client, sub):
            with pytest.raises(NoPermissionError):
                await sub.subscribe(refused)
            await sub.subscribe(allowed)
            assert await publish(client, allowed, "ok") == 1
            assert await received(sub, 1) == {(allowed, b"ok")}
            assert refused not in sub.channels
    finally:
        for port in redis_cluster.live_ports():
            with redis_cluster.client(port) as node:
                node.acl_deluser(user)


class StaleSlotMap(SlotMap):
    """The first answer names the wrong master for every slot (as a node that
    has not heard of a migration yet would); later ones are the cluster's own."""

    def __init__(self, *args, wrong: tuple[str, int], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.wrong: tuple[str, int] | None = wrong

    async def load(self) -> bool:
        if self.wrong is None:
            return await super().load()
        self.masters, self.wrong = [self.wrong] * len(self.masters), None
        return True


async def test_a_stale_slot_map_is_corrected_by_moved(redis_cluster, prefix):
    name = channels(prefix)[0]
    right = redis_cluster.owner(slot_of(name))
    wrong = next(m for m in redis_cluster.masters() if m != right)
    client = cluster_client(redis_cluster.url)
    await client.initialize()
    gaps: list[str] = []
    seeds = [(HOST, p) for p in redis_cluster.live_ports()]
    slots = StaleSlotMap(connection_kwargs(client), seeds, wrong=(HOST, wrong))
    sub = ShardedSubscriber(slots, connection_kwargs(client), on_resubscribed=gaps.append)
    try:
        await sub.subscribe(name)
        assert sub.where() == {(HOST, right): {name}}
        assert gaps == []  # it was never subscribed anywhere else: nothing was missed
        assert await publish(client, name, "found") == 1
        assert await received(sub, 1) == {(name, b"found")}
    finally:
        await sub.aclose()
        await client.aclose()


class LaggingSlotMap(SlotMap):
    """Once `lag()` is called, every node but `informed` answers the map as it was
    (nodes that have not heard of a change yet: under load that lasts seconds)."""

    informed: tuple[str, int] | None = None
    before: list[tuple[str, int] | None] | None = None

    def lag(self, informed: tuple[str, int], elsewhere: tuple[str, int]) -> None:
        self.before, self.informed, self.answered = list(self.masters), informed, elsewhere

    async def load(self) -> bool:
        if self.before is not None and self.answered != self.informed:
            self.masters = list(self.before)
            return True
        return await super().load()


async def test_asks_the_node_that_dropped_its_slot_where_it_went(own_cluster, prefix):
    """A node that sends SUNSUBSCRIBE (or MOVED) knows where the slot went;
    the others may not have heard yet. Asking one of them first would subscribe
    the channel at its old master again (a demoted master still accepts it, as
    a replica), for as long as their map is stale."""
    name = channels(prefix)[0]
    client = cluster_client(own_cluster.url)
    await client.initialize()
    slots = LaggingSlotMap(connection_kwargs(client), [(HOST, p) for p in own_cluster.live_ports()])
    sub = ShardedSubscriber(slots, connection_kwargs(client))
    try:
        await sub.subscribe(name)
        source = own_cluster.owner(slot_of(name))
        target, third = (m for m in own_cluster.masters() if m != source)
        slots.lag(informed=(HOST, source), elsewhere=(HOST, third))
        await asyncio.to_thread(own_cluster.migrate, [slot_of(name)], source, target)
        await until(lambda: sub.where().get((HOST, target)) == {name}, 20, "subscribed at the slot's new master")
    finally:
        await sub.aclose()
        await client.aclose()


async def test_follows_its_slot_through_a_migration_a_manual_failover_and_a_killed_master(own_cluster, prefix):
    name = channels(prefix)[0]
    slot = slot_of(name)
    gaps: list[str] = []
    async with subscriber(own_cluster.url, on_resubscribed=gaps.append) as (client, sub):
        await sub.subscribe(name)
        source = own_cluster.owner(slot)
        target = next(m for m in own_cluster.masters() if m != source)

        await asyncio.to_thread(own_cluster.migrate, [slot], source, target)
        await until(lambda: sub.where().get((HOST, target)) == {name}, 20, "resubscribed at the slot's new master")
        assert gaps == [name]
        assert await publish(client, name, "migrated") == 1
        assert await received(sub, 1) == {(name, b"migrated")}

        replica = own_cluster.replicas_of(target)[0]
        await asyncio.to_thread(own_cluster.failover, replica)
        await until(lambda: sub.where().get((HOST, replica)) == {name}, 20, "resubscribed at the promoted replica")
        assert gaps == [name] * 2
        assert await until(lambda: publish(client, name, "failed over"), 20, "the client to follow") == 1
        assert await received(sub, 1) == {(name, b"failed over")}

        promoted = await asyncio.to_thread(own_cluster.kill_master, replica)
        await until(lambda: sub.where().get((HOST, promoted)) == {name}, 30, "resubscribed after the kill")
        assert gaps == [name] * 3
        assert await until(lambda: publish(client, name, "killed"), 30, "the client to follow") == 1
        assert await received(sub, 1) == {(name, b"killed")}


async def test_leaves_a_master_that_stops_answering(own_cluster, prefix):
    """A paused master (SIGSTOP: no connection error, no reply): the health
    PING notices, and the channel follows its slot once the replica takes over."""
    name = channels(prefix)[0]
    gaps: list[str] = []
    async with subscriber(own_cluster.url, on_resubscribed=gaps.append, health_s=0.5) as (client, sub):
        await sub.subscribe(name)
        master = own_cluster.owner(slot_of(name))
        replica = own_cluster.replicas_of(master)[0]
        own_cluster.pause(master)
        try:
            await until(lambda: (HOST, master) not in sub.where(), 10, "the paused master's connection to be dropped")
            await until(lambda: own_cluster.owner(slot_of(name)) == replica, 60, "the replica to take over")
            await until(lambda: sub.where().get((HOST, replica)) == {name}, 30, "resubscribed at the replica")
        finally:
            own_cluster.resume(master)
        assert gaps == [name]
        assert await until(lambda: publish(client, name, "resumed"), 30, "the client to follow") == 1
        assert await received(sub, 1) == {(name, b"resumed")}


async def test_a_connection_without_subscriptions_still_answers_the_health_ping(redis_cluster):
    """A link whose only SSUBSCRIBE was answered MOVED is not in pub/sub mode:
    PING comes back +PONG, not ["pong", ""], and must still count as an answer."""
    async with subscriber(redis_cluster.url) as (_, sub):
        link = await sub._link((HOST, redis_cluster.masters()[0]))
        await link.ping()
        await until(lambda: link.pongs == 1, 10, "the PONG to count")
