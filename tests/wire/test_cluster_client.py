"""Issue 17's client spike: what redis-py 5.x (arq 0.28 pins redis<6) can and
cannot do against a Redis Cluster for the wire format v2 lifecycle, each
answer a test against a local cluster (tests/helpers/redis_cluster.py: 3 masters, a
replica each). docs/cluster-client.md is the write-up that cites them; the
sharded subscriber prototype is tests/wire/test_sharded_pubsub.py."""

from __future__ import annotations

import asyncio
import collections
import itertools
from typing import ClassVar

import pytest
import redis
import redis.asyncio.client
import redis.asyncio.cluster
from redis.asyncio.connection import Connection
from redis.exceptions import (
    ClusterCrossSlotError,
    MovedError,
    NoScriptError,
    RedisClusterException,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from derender_queue.wire.cluster import (
    SlotClient,
    SlotMap,
    cluster_client,
    connection_kwargs,
    node_client,
    shard_tags,
    slot_of,
    sync_client_for,
)
from derender_queue.wire.connection import async_client, sync_client
from derender_queue.wire.redis_url import parse_cluster_url
from tests.helpers.cluster_jobs import COMMANDS_PER_JOB, FINISH, JOB_COMMANDS, keys, run_jobs
from tests.helpers.redis_cluster import HOST, LocalCluster, until

SLOW_PUSH = """redis.call('LPUSH', KEYS[1], ARGV[1])
local t = redis.call('TIME'); local start = t[1] * 1000 + t[2] / 1000
repeat t = redis.call('TIME') until t[1] * 1000 + t[2] / 1000 - start > tonumber(ARGV[2])
return 1"""
"""A write whose reply comes later than the client waits (it spins ARGV[2] ms after the LPUSH)."""


# ------------------------------------------------------------------ URLs (no server)


def test_cluster_url_forms():
    url = parse_cluster_url("redis+cluster://app:s%40cret@10.0.0.1:7000,[::1]:7001,node-c/"
                            "?socket_timeout=1.5&require_full_coverage=no")
    assert url.nodes == (("10.0.0.1", 7000), ("::1", 7001), ("node-c", 6379))
    assert url.options == {"username": "app", "password": "s@cret", "socket_timeout": 1.5,
                           "require_full_coverage": False}
    tls = parse_cluster_url("rediss+cluster://:pw@n1:7000/0?ssl_ca_certs=/ca.pem&cluster_error_retry_attempts=2")
    assert tls.options == {"password": "pw", "ssl": True, "ssl_ca_certs": "/ca.pem", "cluster_error_retry_attempts": 2}


def test_cluster_client_takes_tls_and_credentials_and_does_not_retry_writes():
    client = cluster_client("rediss+cluster://app:pw@n1:7000,n2:7000?ssl_ca_certs=/ca.pem&socket_timeout=2")
    kwargs = client.get_connection_kwargs()
    assert kwargs["connection_class"].__name__ == "SSLConnection"
    assert (kwargs["username"], kwargs["password"], kwargs["ssl_ca_certs"], kwargs["socket_timeout"]) == (
        "app", "pw", "/ca.pem", 2.0)
    assert sorted(client.nodes_manager.startup_nodes) == ["n1:7000", "n2:7000"]
    assert client.cluster_error_retry_attempts == 1  # see test_cluster_client_retries_can_run_a_write_twice
    assert cluster_client("redis+cluster://n1?cluster_error_retry_attempts=3").cluster_error_retry_attempts == 3


@pytest.mark.parametrize("url, problem", [
    ("redis+cluster://", "at least one node"),
    ("redis+cluster://n1:7000/1", "only database 0"),
    ("redis+cluster://n1:port", "not a number"),
    ("redis+cluster://n1:7000?db=2", "does not take 'db'"),
    ("redis+cluster://n1:7000?socket_timeout=soon", "socket_timeout"),
    ("redis://n1:7000", "not a Cluster URL"),
])
def test_bad_cluster_urls_say_what_is_wrong(url, problem):
    with pytest.raises(ValueError, match=problem):
        parse_cluster_url(url)


def test_single_node_clients_refuse_a_cluster_url():
    """Before: redis-py's "Redis URL must specify one of the following schemes"."""
    for make in (async_client, sync_client):
        with pytest.raises(ValueError, match="wire format v2"):
            make("redis+cluster://127.0.0.1:7000")


# ------------------------------------------------------------------ the URL on a live cluster


async def test_cluster_client_from_the_url_puts_each_shard_on_its_master(redis_cluster, prefix):
    client = cluster_client(redis_cluster.url)
    try:
        await client.initialize()
        assert sorted(n.port for n in client.get_primaries()) == sorted(redis_cluster.masters())
        for tag in shard_tags(16):
            await client.set(keys(prefix, tag)["job"], tag)
        for tag in shard_tags(16):
            key = keys(prefix, tag)["job"]
            with redis_cluster.client(redis_cluster.owner(slot_of(key))) as owner:
                assert owner.get(key) == tag
    finally:
        await client.aclose()


@pytest.mark.slow
async def test_cluster_urls_with_a_password():
    with LocalCluster(password="s3cret", node_timeout_ms=5000) as cluster:
        client = cluster_client(cluster.url)
        try:
            assert await client.set("k", "v") and await client.get("k") == b"v"
        finally:
            await client.aclose()
        sync = sync_client_for(cluster.url)
        try:
            assert sync.get("k") == b"v"
        finally:
            sync.close()
        wrong = cluster_client(cluster.url.replace("s3cret", "wrong"))
        with pytest.raises(RedisClusterException, match=r"invalid username-password|WRONGPASS"):
            await wrong.initialize()


# ------------------------------------------------------------------ Lua


async def test_lua_on_keys_of_one_slot_runs_on_their_master(redis_cluster, prefix):
    k = keys(prefix, shard_tags(16)[5])
    client = cluster_client(redis_cluster.url)
    try:
        with redis_cluster.client(redis_cluster.owner(slot_of(k["job"]))) as owner:
            owner.lpush(k["active"], "the job's value")
            finish = client.register_script(FINISH)
            assert await finish(keys=[k["active"], k["job"], k["done"]], args=["result", 60_000, "note"]) == 1
            assert owner.get(k["job"]) == "result"
            # The fence: the slot no longer holds the job, so a second finish does nothing.
            assert await finish(keys=[k["active"], k["job"], k["done"]], args=["other", 60_000, "note"]) == 0
            assert owner.get(k["job"]) == "result"
    finally:
        await client.aclose()


async def test_lua_on_keys_of_two_slots_is_refused_by_the_client_and_by_the_server(redis_cluster, prefix):
    port = redis_cluster.masters()[0]
    a = keys(prefix, redis_cluster.tag_on(port))["job"]
    b = keys(prefix, redis_cluster.tag_on(port, avoid=[slot_of(a)]))["job"]  # same master, another slot
    client = cluster_client(redis_cluster.url)
    try:
        with pytest.raises(RedisClusterException, match="all keys must map to the same key slot"):
            await client.register_script("return 1")(keys=[a, b])
        await client.initialize()
        node = client.get_node(HOST, port)
        with pytest.raises(ClusterCrossSlotError):  # sent anyway, to the master that has both
            await client.execute_command("EVAL", "return 1", 2, a, b, target_nodes=node)
    finally:
        await client.aclose()


async def test_lua_may_touch_an_undeclared_key_only_on_its_own_node(redis_cluster, prefix):
    """Redis 7.0 lets a script without a shebang touch undeclared keys of other
    slots of its node (compatibility): v2's scripts must declare every key, and
    a `#!lua` script is held to one slot."""
    port, other = redis_cluster.masters()[:2]
    declared = keys(prefix, redis_cluster.tag_on(port))["job"]
    same_node = keys(prefix, redis_cluster.tag_on(port, avoid=[slot_of(declared)]))["job"]
    other_node = keys(prefix, redis_cluster.tag_on(other))["job"]
    client = cluster_client(redis_cluster.url)
    try:
        legacy = client.register_script("return redis.call('SET', ARGV[1], 'x')")
        assert await legacy(keys=[declared], args=[same_node]) == b"OK"
        with pytest.raises(ResponseError, match="non local key"):
            await legacy(keys=[declared], args=[other_node])
        strict = client.register_script("#!lua\nreturn redis.call('SET', ARGV[1], 'x')")
        with pytest.raises(ResponseError, match="do not hash to the same slot"):
            await strict(keys=[declared], args=[same_node])
    finally:
        await client.aclose()


async def test_a_script_a_node_lost_is_reloaded_by_a_script_object_only(redis_cluster, prefix):
    """SCRIPT LOAD goes to every master; a node that lost its scripts (restart,
    failover, SCRIPT FLUSH) answers NOSCRIPT: a Script object loads it again
    and retries, a raw EVALSHA or a pipeline does not. redis-py 5's cluster
    pipeline refuses `evalsha` (and Script objects) outright."""
    k = keys(prefix, shard_tags(16)[0])
    client = cluster_client(redis_cluster.url)
    try:
        script = client.register_script(f"return redis.call('LPUSH', KEYS[1], '{prefix}')")
        await script(keys=[k["lane"]])
        for port in redis_cluster.masters():
            with redis_cluster.client(port) as master:
                assert master.script_exists(script.sha) == [True]
        with redis_cluster.client(redis_cluster.owner(slot_of(k["lane"]))) as owner:
            owner.script_flush()
        with pytest.raises(NoScriptError):
            await client.evalsha(script.sha, 1, k["lane"])
        pipe = client.pipeline()
        with pytest.raises(RedisClusterException, match="evalsha is blocked"):  # and so is a Script object
            pipe.evalsha(script.sha, 1, k["lane"])
        pipe.execute_command("EVALSHA", script.sha, 1, k["lane"])  # the way round it
        with pytest.raises(NoScriptError):
            await pipe.execute()
        assert await script(keys=[k["lane"]]) == 2  # loaded again, then run
    finally:
        await client.aclose()


class CountingConnection(Connection):
    """Counts writes to the socket: one per round trip (a pipeline is one write)."""

    sent: ClassVar[collections.Counter[int]] = collections.Counter()

    async def send_packed_command(self, command, check_health=True):
        CountingConnection.sent[int(self.port)] += 1
        await super().send_packed_command(command, check_health)


async def test_a_script_object_in_a_plain_pipeline_costs_a_script_exists_each_time(redis_cluster, prefix):
    """redis-py's Pipeline checks SCRIPT EXISTS before every execute that holds
    a Script object: a round trip more per job. v2's slot loop pipelines
    `evalsha` itself and loads the script when NOSCRIPT comes back."""
    k = keys(prefix, shard_tags(16)[1])
    port = redis_cluster.owner(slot_of(k["lane"]))
    client = cluster_client(redis_cluster.url)
    plain = node_client({**connection_kwargs(client), "connection_class": CountingConnection}, (HOST, port))
    try:
        script = plain.register_script("return redis.call('LPUSH', KEYS[1], ARGV[1])")
        await plain.script_load(script.script)
        CountingConnection.sent.clear()
        for _ in range(3):
            pipe = plain.pipeline(transaction=False)
            await script(keys=[k["lane"]], args=["v"], client=pipe)
            pipe.lindex(k["lane"], -1)
            await pipe.execute()
        assert CountingConnection.sent[port] == 6
        CountingConnection.sent.clear()
        for _ in range(3):
            pipe = plain.pipeline(transaction=False)
            pipe.evalsha(script.sha, 1, k["lane"], "v")
            pipe.lindex(k["lane"], -1)
            await pipe.execute()
        assert CountingConnection.sent[port] == 3
    finally:
        await plain.aclose()
        await client.aclose()


async def test_a_promoted_replica_has_no_scripts(own_cluster, prefix):
    """Redis 7 replicates no SCRIPT LOAD: after a failover every script is NOSCRIPT on the new master."""
    k = keys(prefix, shard_tags(16)[0])
    client = cluster_client(own_cluster.url)
    try:
        script = client.register_script("return redis.call('LPUSH', KEYS[1], 'x')")
        assert await script(keys=[k["lane"]]) == 1
        owner = own_cluster.owner(slot_of(k["lane"]))
        await asyncio.to_thread(own_cluster.replicated, owner)  # the LPUSH survives the kill
        new = await asyncio.to_thread(own_cluster.kill_master, owner)
        with own_cluster.client(new) as master:
            assert master.script_exists(script.sha) == [False]
        # The client learns the new layout on the call after the one that met the dead node.
        assert await until(lambda: script(keys=[k["lane"]]), 30, "the script to run on the new master") == 2
    finally:
        await client.aclose()


# ------------------------------------------------------------------ blocking claims


async def test_blmove_through_the_cluster_client_holds_one_of_its_node_connections(redis_cluster, prefix):
    k = keys(prefix, shard_tags(16)[2])
    port = redis_cluster.owner(slot_of(k["lane"]))
    client = cluster_client(redis_cluster.url, client_name=f"{prefix}-blmove")
    try:
        claim = asyncio.create_task(client.blmove(k["lane"], k["active"], 30, "RIGHT", "LEFT"))
        await until(lambda: redis_cluster.blocked_clients(port, "blmove"), 10, "BLMOVE to block")
        assert await client.set(k["job"], "pending")  # the node's other commands take another connection
        node = client.get_node(HOST, port)
        assert len(node._connections) == 2
        with redis_cluster.client(port) as owner:
            owner.lpush(k["lane"], "value")
            assert await claim == b"value"
            assert owner.lrange(k["active"], 0, -1) == ["value"]
        with pytest.raises(RedisClusterException, match="same key slot"):
            await client.blmove(k["lane"], keys(prefix, shard_tags(16)[3])["active"], 1, "RIGHT", "LEFT")
    finally:
        await client.aclose()


async def test_a_blocked_blmove_is_redirected_when_its_slot_moves(own_cluster, prefix):
    """The node answers a client blocked on a slot it gave away with MOVED:
    a node client sees MovedError; the cluster client sends BLMOVE again at
    the new master, where it waits on."""
    k = keys(prefix, shard_tags(16)[0])
    slot = slot_of(k["lane"])
    source = own_cluster.owner(slot)
    target = next(m for m in own_cluster.masters() if m != source)
    client = cluster_client(own_cluster.url)
    plain = node_client(connection_kwargs(client), (HOST, source))
    try:
        via_cluster = asyncio.create_task(client.blmove(k["lane"], k["active"], 60, "RIGHT", "LEFT"))
        via_node = asyncio.create_task(plain.blmove(k["lane"], k["active"], 60, "RIGHT", "LEFT"))
        await until(lambda: len(own_cluster.blocked_clients(source, "blmove")) == 2, 10, "both to block")
        await asyncio.to_thread(own_cluster.migrate, [slot], source, target)
        with pytest.raises(MovedError) as moved:
            await via_node
        assert (moved.value.slot_id, moved.value.port) == (slot, target)
        await until(lambda: own_cluster.blocked_clients(target, "blmove"), 10, "BLMOVE sent again at the target")
        with own_cluster.client(target) as new_owner:
            new_owner.lpush(k["lane"], "value")
        assert await via_cluster == b"value"
    finally:
        await plain.aclose()
        await client.aclose()


async def test_a_blocked_blmove_fails_when_its_master_dies(own_cluster, prefix):
    k = keys(prefix, shard_tags(16)[0])
    port = own_cluster.owner(slot_of(k["lane"]))
    client = cluster_client(own_cluster.url)
    plain = node_client(connection_kwargs(client), (HOST, port))
    try:
        via_cluster = asyncio.create_task(client.blmove(k["lane"], k["active"], 60, "RIGHT", "LEFT"))
        via_node = asyncio.create_task(plain.blmove(k["lane"], k["active"], 60, "RIGHT", "LEFT"))
        await until(lambda: len(own_cluster.blocked_clients(port, "blmove")) == 2, 10, "both to block")
        new = await asyncio.to_thread(own_cluster.kill_master, port)
        for claim in (via_node, via_cluster):
            with pytest.raises(RedisConnectionError):
                await claim
        # The next call re-reads the layout: the promoted replica serves the slot.
        await until(lambda: client.lpush(k["lane"], "v"), 30, "the cluster client to find the new master")
        assert client.get_node_from_key(k["lane"]).port == new
    finally:
        await plain.aclose()
        await client.aclose()


async def test_an_error_on_one_node_breaks_a_blocked_command_on_another(redis_cluster, prefix):
    """On a connection error RedisCluster closes the connections of every node,
    in use or not: a BLMOVE blocked on a healthy master is cut too, and sent
    again on a new connection (its retry); a value the server had moved just
    before the cut would be left in the active list unseen, and the BLMOVE
    sent again would move a second one."""
    a, b = redis_cluster.masters()[:2]
    k = keys(prefix, redis_cluster.tag_on(a))
    other = keys(prefix, redis_cluster.tag_on(b))["job"]
    name = f"{prefix}-victim"
    client = cluster_client(redis_cluster.url, client_name=name)
    try:
        await client.get(other)  # a connection to b
        claim = asyncio.create_task(client.blmove(k["lane"], k["active"], 60, "RIGHT", "LEFT"))
        [blocked] = await until(lambda: redis_cluster.blocked_clients(a, "blmove"), 10, "BLMOVE to block on a")
        with redis_cluster.client(b) as node_b:
            killed = [node_b.client_kill_filter(_id=c["id"]) for c in node_b.client_list() if c["name"] == name]
        assert killed
        assert await client.get(other) is None  # met the closed connection, retried, fine
        def blocked_ids() -> set[str]:
            return {c["id"] for c in redis_cluster.blocked_clients(a, "blmove")}

        # Nothing happened to a, yet its BLMOVE was cut and sent again on another connection.
        assert await until(lambda: blocked_ids() and blocked["id"] not in blocked_ids(), 10, "BLMOVE sent again")
        with redis_cluster.client(a) as node_a:
            node_a.lpush(k["lane"], "value")
        assert await claim == b"value"
    finally:
        await client.aclose()


async def _runs(redis_cluster, lane: str, call) -> int:
    """How many times a call that timed out ran its LPUSH (once the node is idle again)."""
    with pytest.raises(RedisTimeoutError):
        await call
    with redis_cluster.client(redis_cluster.owner(slot_of(lane))) as owner:
        await until(lambda: owner.ping(), 30, "the node to be idle")  # it answers after the queued scripts
        return owner.llen(lane)


async def test_every_fifth_moved_closes_every_connection_of_the_cluster_client(own_cluster, prefix):
    """redis-py re-reads the whole layout every `reinitialize_steps` (5)
    MOVEDs, closing every connection first: a resharding cuts the blocked
    commands of masters it does not touch."""
    a, b, c = own_cluster.masters()
    client = cluster_client(own_cluster.url)
    try:
        moved = [keys(prefix, own_cluster.tag_on(a, start=n * 1000))["job"] for n in range(5)]
        for key in moved:
            await client.set(key, "x")
        k = keys(prefix, own_cluster.tag_on(c))
        claim = asyncio.create_task(client.blmove(k["lane"], k["active"], 60, "RIGHT", "LEFT"))
        [blocked] = await until(lambda: own_cluster.blocked_clients(c, "blmove"), 10, "BLMOVE to block on c")
        await asyncio.to_thread(own_cluster.migrate, [slot_of(key) for key in moved], a, b)  # the client is not told
        for key in moved[:4]:
            assert await client.get(key) == b"x"  # MOVED, followed
        assert [x["id"] for x in own_cluster.blocked_clients(c, "blmove")] == [blocked["id"]]
        assert await client.get(moved[4]) == b"x"  # the fifth
        assert await until(lambda: [x for x in own_cluster.blocked_clients(c, "blmove") if x["id"] != blocked["id"]],
                           10, "BLMOVE cut and sent again")
        with own_cluster.client(c) as node_c:
            node_c.lpush(k["lane"], "value")
        assert await claim == b"value"
    finally:
        await client.aclose()


async def test_cluster_client_retries_can_run_a_write_twice(redis_cluster, prefix):
    """redis-py's RedisCluster sends a command again after a timeout, when it
    may have run already: one call that failed ran four times with its default
    of 3 retries, twice with `cluster_client`'s 1. A pipeline is tried
    `cluster_error_retry_attempts` times in all: once with 1, and not at all
    with 0 (a redis-py 5.3 bug: UnboundLocalError)."""
    # Each call waits 1 s for a reply that comes after 1.5 s. Whatever redis-py sends between two
    # tries (CLUSTER SLOTS, COMMAND, a new connection's handshake) may wait for the running script
    # too, and still has 0.5 s to spare: the number of runs does not depend on the machine's load.
    lane = keys(prefix, shard_tags(16)[4])["lane"]
    for retries, runs in ((3, 4), (1, 2)):
        client = cluster_client(redis_cluster.url, socket_timeout=1.0, cluster_error_retry_attempts=retries)
        try:
            await client.initialize()
            assert await _runs(redis_cluster, f"{lane}:{retries}", client.eval(SLOW_PUSH, 1, f"{lane}:{retries}",
                                                                              "job", 1500)) == runs
            pipe = client.pipeline().execute_command("EVAL", SLOW_PUSH, 1, f"{lane}:{retries}:p", "job", 1500)
            assert await _runs(redis_cluster, f"{lane}:{retries}:p", pipe.execute()) == retries
        finally:
            await client.aclose()
    client = cluster_client(redis_cluster.url, cluster_error_retry_attempts=0)
    try:
        with pytest.raises(UnboundLocalError):
            await client.pipeline().set(f"{lane}:0", "x").execute()
    finally:
        await client.aclose()


# ------------------------------------------------------------------ pipelines, MULTI, WAIT


async def test_a_pipeline_is_one_round_trip_per_master(redis_cluster, prefix):
    """v2's submit (SET status + LPUSH value) is a plain pipeline: one write
    per master it touches, sent to the masters in parallel."""
    client = cluster_client(redis_cluster.url)
    client.nodes_manager.connection_kwargs["connection_class"] = CountingConnection  # nodes made from now on
    try:
        for _ in range(2):  # the first connects (and a new connection sends CLIENT SETINFO)
            CountingConnection.sent.clear()
            pipe = client.pipeline()
            for tag in shard_tags(16):
                pipe.set(keys(prefix, tag)["job"], "envelope", px=60_000)
                pipe.lpush(keys(prefix, tag)["lane"], "value")
            assert len(await pipe.execute()) == 32
        assert CountingConnection.sent == {port: 1 for port in redis_cluster.masters()}
    finally:
        await client.aclose()


async def test_the_cluster_client_has_no_multi_but_a_node_client_does(redis_cluster, prefix):
    k = keys(prefix, shard_tags(16)[6])
    port = redis_cluster.owner(slot_of(k["job"]))
    client = cluster_client(redis_cluster.url)
    plain = node_client(connection_kwargs(client), (HOST, port))
    try:
        with pytest.raises(RedisClusterException, match="transaction is deprecated in cluster mode"):
            client.pipeline(transaction=True)
        async with plain.pipeline(transaction=True) as tx:
            tx.set(k["job"], "envelope").lpush(k["lane"], "value")
            assert await tx.execute() == [True, 1]
        other = keys(prefix, redis_cluster.tag_on(port, avoid=[slot_of(k["job"])]))["job"]
        with pytest.raises(ClusterCrossSlotError):
            async with plain.pipeline(transaction=True) as tx:
                await tx.set(k["job"], "x").set(other, "x").execute()
    finally:
        await plain.aclose()
        await client.aclose()


async def test_wait_counts_the_writes_of_its_own_connection_only(redis_cluster, prefix):
    """WAIT waits for this connection's writes: it belongs in the same
    pipeline as the writes, which the cluster client sends on one connection
    of their master; a WAIT elsewhere answers at once whatever was replicated."""
    k = keys(prefix, shard_tags(16)[7])
    port = redis_cluster.owner(slot_of(k["job"]))
    replica = redis_cluster.replicas_of(port)[0]
    client = cluster_client(redis_cluster.url)
    fresh = node_client(connection_kwargs(client), (HOST, port))
    try:
        await client.initialize()
        master = client.get_node(HOST, port)
        pipe = client.pipeline()
        pipe.set(k["job"], "e").lpush(k["lane"], "v").execute_command("WAIT", 1, 2000, target_nodes=master)
        assert (await pipe.execute())[-1] == 1
        redis_cluster.pause(replica)
        try:
            pipe = client.pipeline()
            pipe.set(k["job"], "e").lpush(k["lane"], "v").execute_command("WAIT", 1, 200, target_nodes=master)
            assert (await pipe.execute())[-1] == 0  # not on the replica: refused, as it should be
            assert await fresh.execute_command("WAIT", 1, 200) == 1  # nothing written here: "replicated"
        finally:
            redis_cluster.resume(replica)
    finally:
        await fresh.aclose()
        await client.aclose()


# ------------------------------------------------------------------ pub/sub from Lua


async def _subscriber(client, port: int, command: str, channel: str) -> Connection:
    conn = node_client(connection_kwargs(client), (HOST, port)).connection_pool.make_connection()
    await conn.connect()
    await conn.send_command(command, channel)
    assert (await conn.read_response())[0] == command.lower().encode()
    return conn


async def _next(conn: Connection, timeout: float = 5.0):
    return await conn.read_response(timeout=timeout)


async def test_publish_from_lua_reaches_every_node_and_spublish_its_shard_only(redis_cluster, prefix):
    """PUBLISH is broadcast over the cluster bus to every node (each API
    process may listen anywhere, but every result crosses every node);
    SPUBLISH reaches the subscribers of its shard (master and replicas) only."""
    k = keys(prefix, shard_tags(16)[8])
    port = redis_cluster.owner(slot_of(k["job"]))
    elsewhere = next(m for m in redis_cluster.masters() if m != port)
    replica = redis_cluster.replicas_of(port)[0]
    client = cluster_client(redis_cluster.url)
    plain_channel = f"{prefix}:done:api-1"
    subs = []
    try:
        subs = [await _subscriber(client, elsewhere, "SUBSCRIBE", plain_channel),
                await _subscriber(client, port, "SSUBSCRIBE", k["done"]),
                await _subscriber(client, replica, "SSUBSCRIBE", k["done"])]
        await client.eval("return redis.call('PUBLISH', ARGV[1], ARGV[2])", 1, k["job"], plain_channel, "p")
        assert await _next(subs[0]) == [b"message", plain_channel.encode(), b"p"]
        # It counts the master's own subscribers; the replica's hears it through replication.
        assert await client.eval("return redis.call('SPUBLISH', KEYS[2], ARGV[1])", 2, k["job"], k["done"], "s") == 1
        for sub in subs[1:]:
            assert await _next(sub) == [b"smessage", k["done"].encode(), b"s"]
        with pytest.raises(MovedError):  # a shard channel is served by its slot's nodes only
            await _subscriber(client, elsewhere, "SSUBSCRIBE", k["done"])
        far = keys(prefix, redis_cluster.tag_on(elsewhere))["done"]
        with pytest.raises(ResponseError, match="non local key"):
            await client.eval("return redis.call('SPUBLISH', ARGV[1], 'x')", 1, k["job"], far)
    finally:
        for sub in subs:
            await sub.disconnect()
        await client.aclose()


def test_redis_py_5_has_no_async_sharded_pubsub():
    """What the sharded subscriber (wire/sharded_pubsub.py) stands in for:
    asyncio PubSub without ssubscribe, asyncio RedisCluster without pubsub."""
    assert redis.__version__.startswith("5.")
    assert not hasattr(redis.asyncio.client.PubSub, "ssubscribe")
    assert not hasattr(redis.asyncio.cluster.RedisCluster, "pubsub")
    assert hasattr(redis.client.PubSub, "ssubscribe")  # the blocking client has it


async def test_a_slot_that_moves_unsubscribes_its_shard_subscribers(own_cluster, prefix):
    """A node that gives a slot away (migration, or demoted by a failover)
    sends SUNSUBSCRIBE to the subscribers of its shard channels: the sharded
    subscriber's cue to subscribe again where the slot is now."""
    k = keys(prefix, shard_tags(16)[0])
    slot = slot_of(k["done"])
    source = own_cluster.owner(slot)
    target = next(m for m in own_cluster.masters() if m != source)
    client = cluster_client(own_cluster.url)
    try:
        sub = await _subscriber(client, source, "SSUBSCRIBE", k["done"])
        await asyncio.to_thread(own_cluster.migrate, [slot], source, target)
        assert await _next(sub, 10) == [b"sunsubscribe", k["done"].encode(), 0]
        await sub.disconnect()
        sub = await _subscriber(client, target, "SSUBSCRIBE", k["done"])
        await asyncio.to_thread(own_cluster.failover, own_cluster.replicas_of(target)[0])
        assert await _next(sub, 10) == [b"sunsubscribe", k["done"].encode(), 0]
        await sub.disconnect()
    finally:
        await client.aclose()


# ------------------------------------------------------------------ spreading shards over masters


def redis_cli_split(masters: int) -> list[range]:
    """The slot ranges `redis-cli --cluster create` gives `masters` masters."""
    per, first, cursor, out = 16384 / masters, 0, 0.0, []
    for i in range(masters):
        last = 16383 if i == masters - 1 else max(first, min(16383, round(cursor + per - 1)))
        out.append(range(first, last + 1))
        first, cursor = last + 1, cursor + per
    return out


def shares(tags, masters: int) -> list[int]:
    """Shards per master under redis-cli's split."""
    split = redis_cli_split(masters)
    return [sum(slot_of(t) in r for t in tags) for r in split]


NAIVE = tuple(f"s{i}" for i in range(16))


def first_in_range_tags(shards: int) -> list[str]:
    """The wire v2 design's first rule: the first s{i}-{k} whose slot is in the i-th range."""
    ranges = [range(i * 16384 // shards, (i + 1) * 16384 // shards) for i in range(shards)]
    return [next(t for k in itertools.count() if slot_of(t := f"s{i}-{k}") in r) for i, r in enumerate(ranges)]


@pytest.mark.parametrize("shards", [16, 32, 64, 256])
def test_shard_tags_give_every_master_an_even_share(shards):
    """Tags nearest their range's middle: within one shard of each other on 2
    to 16 masters. The first tag in range (the design's first rule) leaves 2
    apart on 7 masters, say; naive tags s0..s15 are a random draw."""
    for masters in range(2, 17):
        counts = shares(shard_tags(shards), masters)
        assert max(counts) - min(counts) <= 1, (masters, counts)
    assert shares(first_in_range_tags(16), 7) == [2, 3, 2, 3, 2, 1, 3]
    assert shares(NAIVE, 3) == [6, 4, 6] and shares(NAIVE, 8) == [2, 2, 2, 2, 1, 3, 1, 3]


def test_shard_tags_are_fixed():
    """Key names are built from them: a change strands every queued job (a rolling upgrade must agree)."""
    assert shard_tags(1) == ("s0",)
    assert shard_tags(16)[:4] == ("s0-205", "s1-258", "s2-131", "s3-821")
    assert len(set(shard_tags(256))) == 256
    with pytest.raises(ValueError, match=r"1\.\.256"):
        shard_tags(257)


def test_redis_cli_split_is_the_clusters(redis_cluster):
    owners = redis_cluster.slot_owners()
    assert [{owners[s] for s in r} for r in redis_cli_split(3)] == [{m} for m in redis_cluster.masters()]


def _jobs_per_master(redis_cluster) -> list[int]:
    per_master = []
    for port in redis_cluster.masters():
        stats = redis_cluster.commandstats(port)
        per_master.append(sum(stats.get(c, 0) for c in JOB_COMMANDS))
    return per_master


async def test_commands_spread_over_the_masters_within_25_percent(redis_cluster, prefix):
    """Issue 17's acceptance: with the default 16 shards, commands per master
    (INFO commandstats, those run by scripts included) within +-25% of each
    other's mean; the naive tags s0..s15 put 6/4/6 shards on the 3 masters."""
    spread = {}
    for name, tags in (("design", shard_tags(16)), ("naive", NAIVE)):
        client = cluster_client(redis_cluster.url)
        try:
            redis_cluster.reset_stats()
            await run_jobs(client, f"{prefix}{name}", tags, 160)
        finally:
            await client.aclose()
        counts = _jobs_per_master(redis_cluster)
        assert sum(counts) == 160 * COMMANDS_PER_JOB
        mean = sum(counts) / len(counts)
        spread[name] = (min(counts) / mean - 1, max(counts) / mean - 1)
    assert spread["design"][0] >= -0.25 and spread["design"][1] <= 0.25, spread
    assert spread["naive"][0] < spread["design"][0], spread  # the naive tags' emptiest master is emptier


async def test_a_claim_connection_that_fails_to_close_is_dropped_without_raising():
    """Closing a connection whose transport is gone raises uvloop's RuntimeError;
    `lost()` runs in the claim loop's error handling, so it must not raise (in
    the soak it ended a worker's job loop)."""

    class GoneTransport:
        async def aclose(self) -> None:
            raise RuntimeError("unable to perform operation on <TCPTransport closed=True>; the handler is closed")

    claim = SlotClient(SlotMap({}, []), {}, 0)
    claim._client = GoneTransport()
    await claim.lost(RedisConnectionError("Connection closed by server."))
    assert claim._client is None


async def test_reading_the_slot_map_survives_a_connection_that_fails_to_close(monkeypatch):
    """SlotMap.load closes each node client it asked; a close that raises
    uvloop's RuntimeError (its transport gone with a killed master) must not
    escape: it ran in a claim loop's error handling and ended a worker's job
    loop in the soak."""
    import derender_queue.wire.cluster as cluster_module

    class DeadNode:
        async def execute_command(self, *args: object) -> None:
            raise RedisConnectionError("Connection closed by server.")

        async def aclose(self) -> None:
            raise RuntimeError("unable to perform operation on <TCPTransport closed=True>; the handler is closed")

    monkeypatch.setattr(cluster_module, "node_client", lambda *args, **kwargs: DeadNode())
    assert await SlotMap({}, [("127.0.0.1", 1)]).load() is False
