"""Worker liveness: a key per worker with the models (and tokenizer hashes) it
serves, refreshed every `heartbeat_s` and expiring after three missed beats."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable

import msgspec
from redis.asyncio import Redis

from derender_queue.wire.failures import describe, redis_failure
from derender_queue.wire.keys import Keys, now_ms

log = logging.getLogger("derender.worker")
DEATH_BEATS = 3
"""A worker is dead once this many beats are missed (its heartbeat expires)."""


class Heartbeat(msgspec.Struct):
    id: str
    host: str
    pid: int
    models: dict[str, str]
    """Served model name -> sha256 of its tokenizer.json (rolling upgrades show)."""
    concurrency: int
    started_ms: int
    beat_ms: int = 0
    # Counters for the status page; defaults keep older heartbeats decodable.
    busy: int = 0
    """Executors (light thread + heavy children or threads) running derender work now."""
    executors: int = 0
    jobs_done: int = 0
    """Jobs this worker process finished (any status) since it started."""
    client_errors: int = 0
    """... of which answered 4xx."""
    errors: int = 0
    """... of which answered 5xx."""


def new_heartbeat(worker_id: str, models: dict[str, str], concurrency: int) -> Heartbeat:
    return Heartbeat(worker_id, socket.gethostname(), os.getpid(), models, concurrency, now_ms())


CLAIM_BEATS = DEATH_BEATS - 1
"""A worker whose last beat written is older than this many intervals claims
no more jobs: its heartbeat expires a beat later, and others then take over
whatever it holds (the job would run twice)."""


async def beat_forever(redis: Redis, keys: Keys, beat: Heartbeat, interval_s: float,
                       refresh: Callable[[Heartbeat], None] | None = None,
                       alive: Callable[[], bool] | None = None, *,
                       beaten: Callable[[bool], None],
                       on_error: Callable[[str], None]) -> None:
    """`refresh` updates the beat's counters before each write; while `alive()`
    is false the heartbeat is withdrawn, so nobody counts on a worker whose job
    loop is dead or stuck. `beaten(True)` follows each beat written, and
    `beaten(False)` each one withdrawn or failed. A failure of any type (redis-py's
    cluster client fails calls with errors of any type: wire/failures.py) is
    logged and counted (`on_error("heartbeat")`), and the next beat goes on at the
    same interval, not backed off: it is one command every `interval_s` (no spin),
    and a beat that waited longer would let the key expire once Redis is back."""
    key, ttl_ms = keys.worker(beat.id), int(interval_s * DEATH_BEATS * 1000)
    try:
        while True:
            try:
                beat.beat_ms = now_ms()
                if refresh is not None:
                    refresh(beat)
                if alive is not None and not alive():
                    await _withdraw(redis, keys, beat.id)
                    written = False
                else:
                    async with redis.pipeline(transaction=not keys.cluster) as pipe:  # a cluster has no MULTI
                        pipe.set(key, msgspec.json.encode(beat), px=ttl_ms)
                        pipe.zadd(keys.workers, {beat.id: beat.beat_ms + ttl_ms})
                        pipe.zremrangebyscore(keys.workers, "-inf", beat.beat_ms)
                        await pipe.execute()
                    written = True
            except Exception as exc:
                written = False
                if redis_failure(exc):
                    log.warning("heartbeat failed: %s", describe(exc))
                else:
                    log.exception("heartbeat failed")
                on_error("heartbeat")
            beaten(written)
            await asyncio.sleep(interval_s)
    finally:
        with contextlib.suppress(Exception):  # best effort: it expires anyway
            await _withdraw(redis, keys, beat.id)


async def _withdraw(redis: Redis, keys: Keys, worker_id: str) -> None:
    await redis.delete(keys.worker(worker_id))
    await redis.zrem(keys.workers, worker_id)


_decode_beat = msgspec.json.Decoder(Heartbeat)


async def _beats(redis: Redis, keys: Keys) -> list[tuple[str, bytes]]:
    """(worker id, heartbeat value) of every worker alive now: the registry, then one MGET."""
    ids = await redis.zrangebyscore(keys.workers, now_ms(), "+inf")
    if not ids:
        return []
    names = [i.decode("utf-8", "replace") for i in ids]
    values = await redis.mget([keys.worker(n) for n in names])
    return [(name, value) for name, value in zip(names, values, strict=True) if value]


async def live_workers(redis: Redis, keys: Keys,
                       on_bad: Callable[[str, Exception], None] | None = None) -> list[Heartbeat]:
    """Heartbeats of every worker alive now.

    A heartbeat this version cannot decode (a worker of another version, or
    anything else written there) is skipped and reported to `on_bad`: one
    stranger must not blind the API to every other worker."""
    beats = []
    for name, value in await _beats(redis, keys):
        try:
            beats.append(_decode_beat.decode(value))
        except msgspec.MsgspecError as exc:
            if on_bad is not None:
                on_bad(name, exc)
    return beats


class _ModelsOnly(msgspec.Struct):
    models: dict[str, str] = {}


_models_only = msgspec.json.Decoder(_ModelsOnly)


async def served_models(redis: Redis, keys: Keys) -> set[str]:
    """Models some live worker serves now (producers' fail-fast check); a
    heartbeat this version cannot read is skipped, not fatal."""
    served: set[str] = set()
    for _, value in await _beats(redis, keys):
        with contextlib.suppress(msgspec.MsgspecError):
            served.update(_models_only.decode(value).models)
    return served
