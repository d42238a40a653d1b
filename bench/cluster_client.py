"""Redis Cluster with redis-py 5 (issue 17's client spike): what a call costs
through the async RedisCluster against a plain client of the node that serves
the key, and how v2's commands spread over the masters by shard tags.

    python bench/cluster_client.py [--calls 2000] [--reps 5] [--jobs 1600]

A local cluster (tests/helpers/redis_cluster.py: 3 masters, a replica each). Latency:
one call after another on one event loop (uvloop), per call, wall and the
process's CPU; each figure the median over --reps repetitions, the two clients
alternating. Calls: a Lua script on one shard's keys (EVALSHA: SET + DEL), a
BLMOVE that finds a value (a claim under load), v2's submit pipeline (SET +
LPUSH) and a GET. Spread: --jobs jobs of the v2 lifecycle by hand
(tests/helpers/cluster_jobs.py, 8 commands each), round-robin over 16 shards, with
the shard tags of derender_queue/wire/cluster.py and with naive tags s0..s15;
commands per master from INFO commandstats (scripts' commands included).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT)]
sys.path += [str(ROOT / "tests")]

import uvloop  # noqa: E402

from derender_queue.wire.cluster import cluster_client, connection_kwargs, node_client, shard_tags  # noqa: E402
from tests.helpers.cluster_jobs import COMMANDS_PER_JOB, JOB_COMMANDS, keys, run_jobs  # noqa: E402
from tests.helpers.redis_cluster import HOST, LocalCluster  # noqa: E402

LUA = "redis.call('SET', KEYS[1], ARGV[1], 'PX', 60000); return redis.call('DEL', KEYS[2])"


async def per_call(call: Callable[[], Awaitable[object]], calls: int) -> tuple[float, float]:
    """(wall µs, CPU µs) per call, `calls` calls one after another."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        await call()
    return (time.perf_counter() - wall) / calls * 1e6, (time.process_time() - cpu) / calls * 1e6


async def latency(cluster: LocalCluster, calls: int, reps: int) -> None:
    k = keys("bench", shard_tags(16)[0])
    client = cluster_client(cluster.url)
    await client.initialize()
    node = client.get_node_from_key(k["lane"])
    plain = node_client(connection_kwargs(client), (HOST, node.port))
    sha = await client.script_load(LUA)
    conn = plain.connection_pool.make_connection()  # one connection, used directly (no pool, no checks)
    await conn.connect()

    def raw(*commands: tuple[object, ...]) -> Callable[[], Awaitable[object]]:
        async def call() -> object:
            await conn.send_packed_command(conn.pack_commands(commands), check_health=False)
            return [await conn.read_response() for _ in commands]
        return call

    async def fill() -> None:
        await plain.delete(k["lane"], k["active"])
        for start in range(0, calls, 1000):
            await plain.lpush(k["lane"], *(["value"] * min(1000, calls - start)))

    def submit(redis):  # v2's submit: one pipeline, no MULTI
        async def call() -> object:
            pipe = redis.pipeline() if redis is client else redis.pipeline(transaction=False)
            pipe.set(k["job"], '{"v":2}', px=60_000).lpush(k["active"], "v")
            return await pipe.execute()
        return call

    set_job, push = ("SET", k["job"], '{"v":2}', "PX", 60_000), ("LPUSH", k["active"], "v")
    cases: dict[str, dict[str, Callable[[], Awaitable[object]]]] = {
        "Lua (EVALSHA: SET + DEL)": {
            "cluster": lambda: client.evalsha(sha, 2, k["job"], k["active"], "r"),
            "node": lambda: plain.evalsha(sha, 2, k["job"], k["active"], "r"),
            "conn": raw(("EVALSHA", sha, 2, k["job"], k["active"], "r"))},
        "BLMOVE that finds a value": {
            "cluster": lambda: client.blmove(k["lane"], k["active"], 1, "RIGHT", "LEFT"),
            "node": lambda: plain.blmove(k["lane"], k["active"], 1, "RIGHT", "LEFT"),
            "conn": raw(("BLMOVE", k["lane"], k["active"], "RIGHT", "LEFT", 1))},
        "submit pipeline (SET + LPUSH)": {"cluster": submit(client), "node": submit(plain), "conn": raw(set_job, push)},
        "GET": {"cluster": lambda: client.get(k["job"]), "node": lambda: plain.get(k["job"]),
                "conn": raw(("GET", k["job"]))},
    }
    print(f"\n{calls} calls per repetition, {reps} repetitions; medians per call, wall / CPU (µs)\n")
    print("| call | RedisCluster | node client (redis.asyncio.Redis) | node connection, used directly "
          "| RedisCluster / node client | RedisCluster / connection |")
    print("|---|---|---|---|---|---|")
    for name, modes in cases.items():
        runs: dict[str, list[tuple[float, float]]] = {mode: [] for mode in modes}
        for rep in range(reps):
            order = list(modes) if rep % 2 == 0 else list(reversed(modes))
            for mode in order:
                await fill()
                runs[mode].append(await per_call(modes[mode], calls))
        med = {mode: tuple(statistics.median(r[i] for r in runs[mode]) for i in (0, 1)) for mode in modes}
        cells = " | ".join(f"{med[m][0]:.0f} / {med[m][1]:.0f}" for m in ("cluster", "node", "conn"))
        ratios = " | ".join(f"{med['cluster'][0] / med[m][0]:.2f} / {med['cluster'][1] / med[m][1]:.2f}"
                            for m in ("node", "conn"))
        print(f"| {name} | {cells} | {ratios} |")
    await plain.delete(k["lane"], k["active"], k["job"])
    await conn.disconnect()
    await plain.aclose()
    await client.aclose()


async def spread(cluster: LocalCluster, jobs: int) -> None:
    masters = cluster.masters()
    print(f"\n{jobs} jobs round-robin over 16 shards; commands per master (INFO commandstats)\n")
    print("| tags | " + " | ".join(f"master {i + 1}" for i in range(len(masters))) + " | vs mean | per job |")
    print("|---|" + "---|" * len(masters) + "---|---|")
    for name, tags in (("shard_tags(16)", shard_tags(16)), ("naive s0..s15", [f"s{i}" for i in range(16)])):
        cluster.reset_stats()
        client = cluster_client(cluster.url)
        try:
            await run_jobs(client, f"spread-{name[:5]}", tags, jobs)
        finally:
            await client.aclose()
        counts = []
        for port in masters:
            stats = cluster.commandstats(port)
            counts.append(sum(stats.get(c, 0) for c in JOB_COMMANDS))
        mean = sum(counts) / len(counts)
        print(f"| {name} | " + " | ".join(str(c) for c in counts)
              + f" | {min(counts) / mean - 1:+.0%} .. {max(counts) / mean - 1:+.0%} | {sum(counts) / jobs:.0f} |")
    print(f"\n(v2's design: {COMMANDS_PER_JOB} commands per job)")


async def main(args: argparse.Namespace) -> None:
    with LocalCluster(node_timeout_ms=5000) as cluster:
        await latency(cluster, args.calls, args.reps)
        await spread(cluster, args.jobs)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=1600)
    uvloop.run(main(ap.parse_args()))
