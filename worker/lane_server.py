"""A worker's wire format v2 lane: claim with BLMOVE, run, finish fenced.

It serves a `LaneHost` (worker/queue_worker.py's arq worker: the jobs it
runs go into the host's task table, which arq's shutdown drains). Two loops
claim, one per lane (light and heavy), each with claim slots of its own, and
each slot has an active list of its own; a claim moves
a job value from the lane into a free slot's list, so a claim can never be
lost between Redis and the worker: if the reply is lost, the value is in the
slot's list and is read back from there. Its lease is the worker's heartbeat:
`recover_dead` hands the values of workers whose heartbeat expired back to the
lane (wire/lanes.py RECOVER).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import RedisCluster

from derender_queue.wire.cluster import SlotMap
from derender_queue.wire.connection import in_memory
from derender_queue.wire.failures import describe, redis_failure
from derender_queue.wire.heartbeat import CLAIM_BEATS, DEATH_BEATS
from derender_queue.wire.keys import now_ms, parse_active, tag_in
from derender_queue.wire.lanes import Scripts, claim, put_back
from derender_queue.wire.pacing import Backoff
from derender_queue.wire.queue import SMALL_JOB_BYTES
from worker import metrics
from worker.lane_host import LaneHost
from worker.lane_values import read_claim
from worker.wakers import Waker, waker_for

log = logging.getLogger("derender.worker")


@dataclass
class Lane:
    """One claim loop: a shard's light or heavy lane and the claim slots it
    claims into (each slot has an active list of its own)."""

    key: str
    light: bool
    free: list[int]
    held: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def name(self) -> str:
        return f"{self.key} (v2 {'lane' if self.light else 'heavy lane'})"


class LaneServer:
    def __init__(self, worker: LaneHost) -> None:
        self.worker = worker
        self.runtime = worker.ctx["runtime"]
        self.keys, self.model, self.pool = worker.keys, worker.model, worker.pool
        self.worker_id: str = self.runtime.worker_id
        self.tags = worker.tags
        heavy_slots = max(1, worker.max_jobs // 2)
        per_tag = worker.max_jobs + heavy_slots
        self.lanes: list[Lane] = []
        self.actives: list[str] = []
        """Every claim slot's active list, by slot number: shard i's slots are
        i*per_tag.. (its light loop's `max_jobs`, then its heavy loop's)."""
        self.actives_of: dict[str, list[str]] = {}
        """The same lists by shard tag (what each shard's claims set holds)."""
        for i, tag in enumerate(self.tags):
            first = i * per_tag
            self.lanes += [
                Lane(self.keys.lane(tag, self.model), True,
                     list(reversed(range(first, first + worker.max_jobs)))),
                Lane(self.keys.heavy_lane(tag, self.model), False,
                     list(reversed(range(first + worker.max_jobs, first + per_tag)))),
            ]
            self.actives_of[tag] = [self.keys.active(tag, self.worker_id, self.model, n) for n in range(per_tag)]
            self.actives += self.actives_of[tag]
        """Light jobs get `max_jobs` slots per shard (DERENDER_CONCURRENCY), heavy
        ones half as many of their own, so neither loop ever waits for a slot
        the other holds (a blocked claim holds one)."""
        self.permit_first = len(self.tags) == 1
        """Take a concurrency permit before claiming (one Redis: a claim never
        waits holding a job), or after (a cluster: a claim blocks on each
        shard, and blocked claims must not hold every permit)."""
        self.unsure: set[int] = set()
        """Slots whose last claim failed without an answer: their BLMOVE may
        have moved a value in, so they are read before they claim again."""
        self.listed = False
        """Whether this worker's active lists are in the claims sets (`_registered`)."""
        self._listing = asyncio.Lock()
        self.permits = asyncio.Semaphore(worker.max_jobs)
        """Light jobs running at once, over every shard's light loop."""
        self.scripts = Scripts(self.pool)
        self.in_memory = in_memory(self.pool)
        self.slot_map = SlotMap.of(cast(RedisCluster, self.pool)) if self.keys.cluster else None

    async def serve(self, lane: Lane) -> None:
        """Claim and start `lane`'s jobs until the worker stops taking them
        (one loop per lane, each blocked on its own connection, so a light job
        never waits in Redis behind heavy ones)."""
        waker = waker_for(self.pool, self.slot_map, lane.key, self.worker.poll_delay_s)
        backoff = Backoff(min(self.worker.poll_delay_s, 0.5))
        try:
            while True:
                try:
                    if not self.listed:  # the first pass of each loop; retried like a claim
                        await self._registered(lane.name)
                    await self._claim_one(waker, lane)
                    backoff.reset()
                except Exception as exc:
                    if not redis_failure(exc):
                        # A bug: logged and counted; the loop carries on, but reports no
                        # progress, so a loop that keeps failing shows in /health.
                        log.exception("lane loop error; carrying on", extra={"model": self.model})
                        metrics.JOB_LOOP_ERRORS.labels(self.model).inc()
                        await backoff.wait()
                        continue
                    delay = backoff.next_s()
                    log.warning("%s unavailable (%s); retrying in %.1f s", lane.name, describe(exc), delay)
                    try:
                        await waker.lost(exc)
                    except Exception:  # finding the master again is best effort: the next pass retries
                        log.exception("dropping a lane's connection failed; carrying on")
                    self.worker.liveness.progress(lane.name, delay)
                    await asyncio.sleep(delay)
        finally:
            await waker.aclose()

    async def _registered(self, name: str) -> None:
        """Wait for this worker's first heartbeat, then list its active lists
        for recovery (once, for every loop): a worker nobody can see alive
        must hold nothing."""
        async with self._listing:
            while not self.listed:
                if await self.pool.zscore(self.keys.workers, self.worker_id) is None:
                    self.worker.liveness.progress(name, 1.0)
                    await asyncio.sleep(0.05)
                    continue
                async with self.pool.pipeline(transaction=False) as pipe:
                    self._list_claims(pipe)
                    await pipe.execute()
                self.listed = True

    def _list_claims(self, pipe: Pipeline) -> None:
        """Each shard's claims set gets this worker's active lists of that shard."""
        for tag in self.tags:
            pipe.sadd(self.keys.claims(tag), *self.actives_of[tag])

    async def _claim_one(self, waker: Waker, lane: Lane) -> None:
        worker, free = self.worker, lane.free
        worker.liveness.progress(lane.name, worker.poll_delay_s)
        if not self._may_claim():
            await asyncio.sleep(worker.poll_delay_s)
            return
        permit = lane.light and self.permit_first
        if permit:
            await self._permit(lane)
        if not free:  # every slot busy (the heavy loop's, or a cluster's shard's)
            if permit:
                self.permits.release()
            worker.liveness.waiting_for_jobs(lane.name)
            running = [task for task in lane.held if not task.done()]
            if running:
                await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            else:  # finished, its slot given back on the next loop pass
                await asyncio.sleep(0)
            return
        slot = free.pop()
        try:
            value = await self._take(await waker.get(), lane.key, slot)
            if value is not None and not self._may_claim():
                # Stopping (SIGTERM), or the heartbeat went stale, while the claim
                # blocked: not ours to run.
                self.unsure.add(slot)  # until it is back in the lane
                await put_back(self.pool, self.actives[slot], lane.key)
                self.unsure.discard(slot)
                value = None
            if value is not None and lane.light and not permit:
                await self._permit(lane)  # holding the job: it runs next
        except BaseException:
            self._give_back(slot, lane, permit)
            raise
        if value is None:
            self._give_back(slot, lane, permit)
            return
        task = asyncio.create_task(self._run(slot, value))
        lane.held.add(task)
        task.add_done_callback(lambda _: self._done(slot, lane, task))
        worker.tasks[self.actives[slot]] = task

    def _may_claim(self) -> bool:
        """Not stopping, and no claim while this worker's heartbeat may lapse:
        others would take it over."""
        worker = self.worker
        return worker.allow_pick_jobs and worker.liveness.heartbeat_fresh(CLAIM_BEATS * worker.recover_every_s)

    async def _permit(self, lane: Lane) -> None:
        if self.permits.locked():
            self.worker.liveness.waiting_for_jobs(lane.name)
        await self.permits.acquire()

    def _give_back(self, slot: int, lane: Lane, permit: bool) -> None:
        lane.free.append(slot)
        if permit:
            self.permits.release()

    async def _take(self, waker: Redis, lane: str, slot: int) -> bytes | None:
        """The value the claim moved into the slot's active list. A lost reply
        does not lose it: it is there, read back before the slot claims
        again (a second value there would be deleted with it by its finish)."""
        active = self.actives[slot]
        if slot in self.unsure:
            held = await cast(Awaitable[bytes | None], self.pool.lindex(active, -1))
            self.unsure.discard(slot)
            if held is not None:
                return held
        try:
            return await claim(waker, lane, active, self.worker.poll_delay_s)
        except BaseException:  # any failure, of any type: the value may have moved
            self.unsure.add(slot)
            raise

    def _done(self, slot: int, lane: Lane, task: asyncio.Task[None]) -> None:
        lane.held.discard(task)
        self.worker.tasks.pop(self.actives[slot], None)
        self._give_back(slot, lane, lane.light)  # a light job held a permit while it ran

    async def _run(self, slot: int, value: bytes) -> None:
        """Run a claimed value. Whatever fails, of whatever type, leaves the
        slot unsure: its value may still be in the slot's list, and is read
        back before the slot claims again (a second value beside it would go
        with its finish, unanswered)."""
        active = self.actives[slot]
        claimed = read_claim(value, tag_in(active))
        job_id = claimed.jobs[0][0].id if claimed.jobs else None
        try:
            if not claimed.jobs:  # counted and logged: nothing to run, no one to answer
                what = "dropping a value"
                await self.pool.delete(active)
            elif claimed.batch or claimed.malformed:
                # The batch's jobs run together (an item that is not one was
                # counted and dropped alone: it has no id to answer).
                what = "batch"
                await self.runtime.run_batch(claimed.jobs, claimed.attempt, active, claimed.counted,
                                             claimed.malformed)
            else:
                what = "job"
                envelope, body = claimed.jobs[0]
                if not (claimed.size > SMALL_JOB_BYTES and await self._withdrawn(envelope.id, active)):
                    await self.runtime.run(envelope, body, attempt=claimed.attempt, active=active)
        except Exception as exc:
            # A claimed value that failed (its slot is read back, so it runs again):
            # counted, and logged with its traceback unless Redis failed.
            extra = {"job_id": job_id} if job_id else {}
            if redis_failure(exc):
                metrics.START_FAILURES.labels("redis").inc()
                log.warning("%s failed in Redis (%s); retried when its slot claims again", what, describe(exc),
                            extra=extra)
            else:
                metrics.START_FAILURES.labels("internal").inc()
                log.exception("%s failed outside the derender; retried when its slot claims again", what, extra=extra)
                await asyncio.sleep(BUG_PAUSE_S)
            self.unsure.add(slot)

    async def _withdrawn(self, job_id: str, active: str) -> bool:
        """A heavy job whose pending key is gone (withdrawn, or expired) is
        dropped before its CPU work: its result could not be written anyway
        (`SET ... XX`). One EXISTS, for heavy jobs only; a Redis error here
        leaves the slot to be read back, like any other (`_run`)."""
        if await self.pool.exists(self.keys.job(job_id)):
            return False
        await self.pool.delete(active)
        log.info("withdrawn before it ran: dropped", extra={"job_id": job_id})
        return True

    async def recover_dead(self, take_over: bool) -> None:
        """Re-list this worker's own active lists (a pass that took it for dead while its
        heartbeat lapsed unlisted them); with `take_over` (see `recover_pass`), hand the jobs
        of this model's workers whose heartbeat expired back to their lanes."""
        async with self.pool.pipeline(transaction=False) as pipe:
            if take_over:  # the reads below serve only a take-over
                pipe.zrangebyscore(self.keys.workers, now_ms(), "+inf")
                for tag in self.tags:
                    pipe.smembers(self.keys.claims(tag))
                for tag in self.tags:
                    pipe.get(self.keys.batched(tag, self.model))
            self._list_claims(pipe)
            replies = await pipe.execute()
        if not take_over:
            return
        n = len(self.tags)
        live, listed, counters = replies[0], replies[1 : 1 + n], replies[1 + n : 1 + 2 * n]
        alive = {w.decode() for w in live} | {self.worker_id}
        moved = dropped = 0
        for tag, members, counter in zip(self.tags, listed, counters, strict=True):
            mine = [active for active in (raw.decode() for raw in members) if parse_active(active)[1] == self.model]
            for active in mine:
                if parse_active(active)[0] not in alive:
                    keys = [active, self.keys.lane(tag, self.model), self.keys.claims(tag),
                            self.keys.batched(tag, self.model), self.keys.heavy_lane(tag, self.model)]
                    jobs, junk = await self.scripts.recover(keys=keys, args=[SMALL_JOB_BYTES])
                    moved, dropped = moved + int(jobs), dropped + int(junk)
            # No scripts in memory (nor raw producers); a counter absent or 0 is in range whatever
            # the lane holds: an idle deployment runs no script (16 shards: 8 a second).
            if not self.in_memory and counter not in (None, b"0"):
                await self.scripts.settle(keys=[self.keys.lane(tag, self.model), self.keys.batched(tag, self.model),
                                                *mine])
        if moved:
            log.warning("recovered %d job(s) of dead workers", moved, extra={"model": self.model})
        if dropped:  # a header past frames.py's bounds: what it held beyond its jobs is gone
            metrics.START_FAILURES.labels("bad_frame").inc(dropped)
            log.warning("dropped %d malformed value(s) held by dead workers", dropped, extra={"model": self.model})

    async def recover_forever(self) -> None:
        interval_s = self.worker.recover_every_s
        outage = Outage(DEATH_BEATS * interval_s)
        while True:
            await asyncio.sleep(interval_s)
            await self.recover_pass(outage)

    async def recover_pass(self, outage: Outage) -> None:
        """One recovery pass. While Redis cannot be reached nobody can beat, so
        right after an outage every heartbeat may have expired: until Redis has
        answered for a whole death window (`outage.over()`), live workers have
        not all beaten again, and a pass re-lists but takes nobody's jobs
        (taking a live worker's jobs runs them twice, and can push them past
        DERENDER_MAX_TRIES into an error result)."""
        try:
            await self.recover_dead(take_over=outage.over())
        except Exception as exc:  # never let recovery stop: a dead worker's jobs would wait for ever
            if not redis_failure(exc):
                log.exception("recovery pass failed")
                return
            outage.seen()
            log.warning("recovery pass failed: %s", describe(exc))


BUG_PAUSE_S = 1.0
"""A value that fails for a bug runs again when its slot is read back: once a second, not in a loop."""


class Outage:
    """When this worker last could not reach Redis, and whether a death
    window has passed since."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.last: float | None = None

    def seen(self) -> None:
        self.last = time.monotonic()

    def over(self) -> bool:
        return self.last is None or time.monotonic() - self.last >= self.window_s


def lane_tasks(worker: LaneHost) -> list[asyncio.Task[Any]]:
    server = LaneServer(worker)
    return [*(asyncio.create_task(server.serve(lane), name=f"lane-{lane.key}") for lane in server.lanes),
            asyncio.create_task(server.recover_forever(), name=f"recover-{worker.model}")]
