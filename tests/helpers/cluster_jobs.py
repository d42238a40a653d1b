"""The wire v2 lifecycle's commands on a Redis Cluster, by hand: what the
spike (tests/wire/test_cluster_client.py) and bench/cluster_client.py measure
before the real lifecycle exists. One job, steady state, batching off
(docs/cluster-client.md; the wire v2 design's "command by command"):

    submit  cluster pipeline   SET job PX, LPUSH lane          (1 round trip)
    claim   node client        BLMOVE lane active              (1)
    finish  cluster client     EVALSHA finish: DEL active, SET job PX, SPUBLISH done
    read    cluster client     DEL job                         (1)

8 commands (counting those the script runs), as the design has it.
"""

from __future__ import annotations

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from derender_queue.wire.cluster import connection_kwargs, node_client

FINISH = """if redis.call('DEL', KEYS[1]) == 0 then return 0 end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
redis.call('SPUBLISH', KEYS[3], ARGV[3])
return 1"""
"""The shape of v2's `finish`: the fence, the result, the notification, on keys of one slot."""

JOB_COMMANDS = ("set", "lpush", "blmove", "evalsha", "del", "spublish")
"""What `run_jobs` sends or runs (INFO commandstats names)."""
COMMANDS_PER_JOB = 8


def keys(prefix: str, tag: str) -> dict[str, str]:
    """One shard's v2 keys (every key of shard T carries {T})."""
    return {"lane": f"{prefix}:{{{tag}}}:light:m", "active": f"{prefix}:{{{tag}}}:active:w1:m:light0",
            "job": f"{prefix}:{{{tag}}}:job:{tag}.abc", "done": f"{prefix}:{{{tag}}}:done:api-1"}


async def run_jobs(client: RedisCluster, prefix: str, tags: list[str] | tuple[str, ...], jobs: int) -> None:
    """`jobs` jobs, round-robin over the shards named by `tags`, one after another."""
    await client.initialize()
    sha = await client.script_load(FINISH)
    claimers: dict[str, Redis] = {}
    try:
        for n in range(jobs):
            k = keys(prefix, tags[n % len(tags)])
            pipe = client.pipeline()
            pipe.set(k["job"], '{"v":2}', px=60_000).lpush(k["lane"], '{"v":2}\nbody')
            await pipe.execute()
            node = client.get_node_from_key(k["lane"])
            if node.name not in claimers:
                claimers[node.name] = node_client(connection_kwargs(client), (node.host, node.port))
            assert await claimers[node.name].blmove(k["lane"], k["active"], 1, "RIGHT", "LEFT")
            assert await client.evalsha(sha, 3, k["active"], k["job"], k["done"], "result", 60_000, "id") == 1
            await client.delete(k["job"])
    finally:
        for claimer in claimers.values():
            await claimer.aclose()
