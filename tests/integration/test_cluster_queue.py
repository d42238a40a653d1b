"""Wire format v2 on a Redis Cluster (issue 17): real worker and API processes
against a local cluster of 3 masters with a replica each (tests/helpers/redis_cluster.py).

- answers are byte for byte those of one Redis, and job ids name shards;
- the API serves on a cluster: /ready, Idempotency-Key in its shard, withdrawal;
- with the default 16 shards, commands spread over the masters within +-25%;
- a killed worker's jobs are recovered and answered once; a job whose
  workers keep dying ends with the error after DERENDER_MAX_TRIES; SIGTERM
  drains held jobs;
- the soak: 1,000 jobs while a master is killed (its replica promoted) and
  slots migrate: none lost, none mismatched, none answered twice.
"""

from __future__ import annotations

import asyncio
import collections
import json
import signal

import pytest
import redis

from derender_queue.wire.client import DerenderClient
from derender_queue.wire.cluster import cluster_client, shard_tags, slot_of
from derender_queue.wire.keys import Keys, new_job_id, shard_of, tag_in
from derender_queue.wire.queue import JobQueue
from derender_queue.wire.replication import Durability, NotReplicated
from tests.helpers.redis_cluster import HOST, LocalCluster
from tests.helpers.redis_process import wait_for
from tests.helpers.stack import Stack, get_json, post, stop, wait_until
from tests.wire.test_wire_v2 import (
    MODEL,
    _answers,
    _timeless,
    chat_body,
    job_state,
    poison_is_cut_off,
    sigterm_drains_held_jobs,
    submit,
)

TAGS = set(shard_tags(16))


def scan(cluster: LocalCluster, pattern: str) -> list[tuple[int, bytes]]:
    """(master port, key) of every key matching `pattern` on every master."""
    return [(port, key) for port in cluster.masters() for key in cluster.client(port).scan_iter(pattern)]


def test_answers_on_a_cluster_are_those_of_one_redis(redis_cluster, redis_server, prefix):
    bodies = [chat_body("a"), chat_body("b", 20_000), b'{"generate_response": {}}', b"not json"]
    answers = {}
    for url in (redis_server.url, redis_cluster.url):
        s = Stack(url, prefix, workers=1).start()
        try:
            answers[url] = asyncio.run(_answers(url, prefix, bodies))
        finally:
            s.close()
    assert [status for status, _ in answers[redis_cluster.url]] == [200, 200, 400, 400]
    assert ([_timeless(a) for a in answers[redis_cluster.url]]
            == [_timeless(a) for a in answers[redis_server.url]])


def test_job_ids_name_every_shard_in_turn(redis_cluster, prefix):
    async def ids() -> list[str]:
        async with DerenderClient(redis_cluster.url, key_prefix=prefix) as client:
            return [client.queue.new_id() for _ in range(32)]

    tags = [shard_of(job_id) for job_id in asyncio.run(ids())]
    assert set(tags) == TAGS and tags[:16] == tags[16:]


def test_many_producers_spread_their_jobs_over_every_shard():
    """Each producer starts its turn at a random shard (issue 31 item 4: all
    started at the first, so with 64 shards the low ones took most jobs).
    640 producers (no server needed: a cluster client connects on first use)
    of two jobs each: about 20 per shard, none empty, none past three times that."""
    counts = collections.Counter()
    for _ in range(640):
        client = DerenderClient("redis+cluster://127.0.0.1:1", shards=64)
        counts.update(shard_of(client.queue.new_id()) for _ in range(2))
    assert set(counts) == set(shard_tags(64)), f"{64 - len(counts)} shards got no job"
    assert max(counts.values()) <= 3 * 20, counts.most_common(3)


def test_a_burst_is_batched_in_one_shard_and_the_next_burst_in_the_next(redis_cluster, prefix):
    """Batching as on one Redis (a job arriving while a submit is in flight
    joins it), and the shards still take turns: batch by batch."""
    s = Stack(redis_cluster.url, prefix, workers=0).start()
    try:
        def lanes() -> dict[str, int]:
            found = scan(redis_cluster, f"{prefix}:*:lane:{MODEL}")
            return {tag_in(key): redis_cluster.client(port).llen(key) for port, key in found}

        async def bursts() -> None:
            async with DerenderClient(redis_cluster.url, key_prefix=prefix, batching=True) as client:
                for burst in range(2):
                    await asyncio.gather(*(client.submit("chat", chat_body(f"b{burst}.{i}"), notify=False)
                                           for i in range(20)))

        asyncio.run(bursts())
        # Each burst: the first job alone, then one batch of the other 19, in one shard;
        # the second burst in the shard after the first's (the first one is random).
        found, tags = lanes(), shard_tags(16)
        first = next((tags.index(tag) for tag in found if tags[(tags.index(tag) + 1) % 16] in found), 0)
        assert found == {tags[first]: 2, tags[(first + 1) % 16]: 2}, found
        status, ready = get_json(s.url + "/status.json")
        assert status == 200 and [q["depth"] for q in ready["queues"] if q["model"] == MODEL] == [40], ready
    finally:
        s.close()


def test_the_api_serves_on_a_cluster(redis_cluster, prefix):
    s = Stack(redis_cluster.url, prefix, workers=1).start()
    try:
        status, ready = get_json(f"{s.url}/ready")
        assert status == 200 and ready["workers"] == 1, ready
        status, out, _ = post(f"{s.url}/v1/chat/completions/derender", chat_body("sync"))
        assert status == 200 and json.loads(out)["choices"][0]["message"]["content"], out
        first = submit(s, chat_body("idem"), {"Idempotency-Key": "k1"})
        again = submit(s, chat_body("idem"), {"Idempotency-Key": "k1"})
        assert first == again and shard_of(first) in TAGS
        ((_, slot_key),) = scan(redis_cluster, f"{prefix}:*:idem:*")
        assert tag_in(slot_key) == shard_of(first)  # key and job in one slot
        wait_until(lambda: job_state(s, first)["status"] == "done", 30, 0.1, "answered")
        status, out, _ = post(f"{s.url}/v1/jobs?endpoint=chat", chat_body("other"), {"Idempotency-Key": "k1"})
        assert status == 409, out
        # The status page reads the workers' activity beside their heartbeats, in one slot.
        wait_until(lambda: get_json(f"{s.url}/status.json")[1]["system"]["jobs"] >= 2, 30, 0.1, "the jobs on /status")
    finally:
        s.close()


def test_a_withdrawn_job_is_never_answered_on_a_cluster(redis_cluster, prefix):
    s = Stack(redis_cluster.url, prefix, workers=0).start()
    try:
        withdrawn, kept = submit(s, chat_body("gone")), submit(s, chat_body("kept"))

        async def cancel() -> bool:
            client = cluster_client(redis_cluster.url)
            try:
                return await JobQueue(client, Keys(prefix, cluster=True)).cancel(withdrawn, MODEL)
            finally:
                await client.aclose()

        assert asyncio.run(cancel()) is True
        s.start_worker()
        wait_until(lambda: job_state(s, kept)["status"] == "done", 30, 0.1, "the kept job answered")
        assert get_json(f"{s.url}/v1/jobs/{withdrawn}")[0] == 404
        assert scan(redis_cluster, f"{prefix}:*:job:{withdrawn}") == []
    finally:
        s.close()


def test_commands_spread_over_the_masters_within_25_percent(redis_cluster, prefix):
    """INFO commandstats per master (commands run by scripts included, and the
    idle ones: claims timing out, heartbeats, recovery passes) for 1,600 jobs
    of the real lifecycle, one after another, over the default 16 shards."""
    s = Stack(redis_cluster.url, prefix, workers=2).start()
    try:
        redis_cluster.reset_stats()

        async def run() -> None:
            async with DerenderClient(redis_cluster.url, key_prefix=prefix, batching=False) as client:
                for i in range(1600):
                    assert (await client.wait(await client.submit("chat", chat_body(f"c{i}")))).status == 200

        asyncio.run(run())
        counts = [sum(redis_cluster.commandstats(port).values()) for port in redis_cluster.masters()]
    finally:
        s.close()
    mean = sum(counts) / len(counts)
    assert sum(counts) >= 1600 * 8, counts
    assert all(abs(c / mean - 1) <= 0.25 for c in counts), counts


def test_a_killed_workers_jobs_are_answered_once_on_a_cluster(redis_cluster, prefix, tmp_path):
    s = Stack(redis_cluster.url, prefix, workers=0, log_dir=str(tmp_path)).start()
    try:
        doomed = s.start_worker(DERENDER_DEBUG_JOB_DELAY_S="30")
        s.wait_ready(1)
        jobs = [submit(s, chat_body(f"k{i}")) for i in range(6)]

        wait_until(lambda: len(held_values(redis_cluster, prefix)) == 6, 30, 0.05,
                   "the doomed worker holding every job")
        stop(doomed, signal.SIGKILL)
        s.start_worker()
        for job in jobs:
            wait_until(lambda job=job: job_state(s, job)["status"] == "done", 60, 0.1, "recovered and answered")
    finally:
        s.close()
    # Counted once the workers have exited: a worker logs "job finished" just
    # after publishing, so a client can hold its result before the line exists.
    assert s.executions() == {job: 1 for job in jobs}


def held_values(cluster: LocalCluster, prefix: str) -> list[bytes]:
    """Job values in any claim slot's active list, on every master."""
    return [value for port, key in scan(cluster, f"{prefix}:*:active:*")
            for value in redis.Redis(HOST, port, password=cluster.password).lrange(key, 0, -1)]


def test_a_job_whose_workers_keep_dying_ends_with_an_error_result_on_a_cluster(redis_cluster, prefix):
    poison_is_cut_off(redis_cluster.url, prefix, lambda: held_values(redis_cluster, prefix), {})


def test_sigterm_drains_held_jobs_on_a_cluster(redis_cluster, prefix):
    sigterm_drains_held_jobs(redis_cluster.url, prefix, lambda: held_values(redis_cluster, prefix), {})


def test_a_killed_masters_shards_refuse_writes_until_it_is_back(own_cluster, prefix, monkeypatch):
    """docs/cluster.md: with one replica per master and
    DERENDER_MIN_REPLICAS=1, a killed master's replica is promoted with no
    replica of its own, so its shards refuse submits (NotReplicated: a 503
    from the API) until the killed node is back as its replica; the other
    masters' shards serve throughout."""
    monkeypatch.setenv("DERENDER_MIN_REPLICAS", "1")
    monkeypatch.setenv("DERENDER_REPLICA_TIMEOUT_S", "0.5")
    victim, healthy = own_cluster.masters()[:2]
    tag = {port: next(t for t in sorted(TAGS) if own_cluster.owner(slot_of(f"{{{t}}}")) == port)
           for port in (victim, healthy)}

    async def submit(port: int) -> None:
        async with DerenderClient(own_cluster.url, key_prefix=prefix) as client:
            await client.queue.submit("chat", chat_body("k"), MODEL, job_id=new_job_id(tag[port]))

    asyncio.run(submit(victim))
    own_cluster.kill_master(victim)
    with pytest.raises(NotReplicated, match="0 of 1 Redis replicas"):
        asyncio.run(submit(victim))
    asyncio.run(submit(healthy))
    own_cluster.restart(victim)  # back, as the promoted node's replica

    def served() -> bool:
        # A rejoined node can sync a second time after it is first caught up (a full resync on
        # a replication-id switch), and a WAIT meanwhile times out: "back" is a submit that succeeds.
        try:
            asyncio.run(submit(victim))
        except NotReplicated:
            return False
        return True

    wait_for(served, 30, "the killed master's shards to take writes again")


def test_soak_through_a_failover_and_a_slot_migration(own_cluster, prefix, tmp_path):
    """1,000 jobs, 16 in flight, with DERENDER_MIN_REPLICAS=1 (WAIT): a master
    is killed (its replica takes over, and it rejoins as a replica), then
    1,500 slots migrate. Every job
    whose submit was acknowledged is answered with its own content; a submit
    refused meanwhile is sent again as a new job."""
    s = Stack(own_cluster.url, prefix, workers=2, log_dir=str(tmp_path),
              extra_env={"DERENDER_MIN_REPLICAS": "1"}).start()
    try:
        outcomes, refused, chaos = asyncio.run(_soak(own_cluster, prefix, 1000))
    finally:
        s.close()
    executions = s.executions()  # once the workers have exited (see the killed-worker test)
    assert chaos["promoted"] and chaos["moved_slots"] == 1500
    assert collections.Counter(kind for kind, _ in outcomes) == {"ok": 1000}, (outcomes, refused)
    accepted = {job for _, job in outcomes}
    assert accepted <= set(executions)
    # A job runs again only when the master that held its claim died before a
    # replica had the claim: at most the jobs in flight then.
    assert sum(executions[job] - 1 for job in accepted) <= 16, executions


async def _soak(cluster: LocalCluster, prefix: str, jobs: int) -> tuple[list[tuple[str, str]], dict, dict]:
    chaos: dict[str, object] = {}
    refused: collections.Counter[str] = collections.Counter()
    async with DerenderClient(cluster.url, key_prefix=prefix, durability=Durability.of(1, 1.0)) as client:
        in_flight = asyncio.Semaphore(16)

        async def one(i: int) -> tuple[str, str]:
            async with in_flight:
                for _ in range(120):
                    try:
                        job = await client.submit("chat", chat_body(f"s{i}", 1 + i % 9))
                        break
                    except (redis.RedisError, OSError) as exc:  # not acknowledged: send it again
                        refused[type(exc).__name__] += 1
                        await asyncio.sleep(0.25)
                else:
                    return "never accepted", ""
                result = await client.wait(job, timeout=90)
                answer = json.loads(result.body)
                return ("ok" if result.status == 200 and answer["id"] == f"s{i}" else "mismatch"), job

        async def break_things() -> None:
            await until_answered(50)
            victim = cluster.masters()[0]
            chaos["promoted"] = await asyncio.to_thread(cluster.kill_master, victim)
            # It rejoins as the new master's replica: until then, writes there cannot
            # reach DERENDER_MIN_REPLICAS and are refused (submits) or retried (results).
            await asyncio.to_thread(cluster.restart, victim)
            await until_answered(300)
            source, target = cluster.masters()[:2]
            slots = [slot for slot, port in sorted(cluster.slot_owners().items()) if port == source][:1500]
            await asyncio.to_thread(cluster.migrate, slots, source, target)
            chaos["moved_slots"] = sum(1 for slot in slots if cluster.owner(slot) == target)

        answered = 0

        async def counted(i: int) -> tuple[str, str]:
            nonlocal answered
            outcome = await one(i)
            answered += 1
            return outcome

        async def until_answered(n: int) -> None:
            while answered < n:
                await asyncio.sleep(0.01)

        chaos_task = asyncio.create_task(break_things())
        outcomes = await asyncio.gather(*(counted(i) for i in range(jobs)))
        await chaos_task
    return list(outcomes), dict(refused), chaos

