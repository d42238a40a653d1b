"""Every Redis key name, for one deployment prefix (docs/wire-format.md).

Every key lives under one prefix (`DERENDER_KEY_PREFIX`, default `derender`):

    {p}:done:{reply_to} PUBSUB  when a result is written: the job id, and for results up to
                        64 KiB also "\n" and the result value (saves the waiter a GET)
    {p}:worker:{id}     STR   a live worker's heartbeat JSON (PX = 3 heartbeats)
    {p}:workers         ZSET  worker ids, score = when their heartbeat expires (ms)
    {p}:activity:{id}   STR   a worker's last minute, per second: jobs, 4xx, 5xx, tokens,
                        queue waits (wire/activity.py; PX = a minute past its newest second)
    {p}:stream-secret   STR   the streaming HMAC key workers share when none is configured
    {p}:owner-secret    STR   the API's key for signing job owners when none is configured
                        (no producer may read it: docs/security.md)
    {p}:held:{key}      STR   a stream's held text past 512 (or 128) characters, appended by SETRANGE
                        (wire/held_text.py; PX = DERENDER_HELD_TEXT_TTL_S, a minute
                        once the stream ended; no producer may read it)

Wire format v1's queue, job and result keys (`{p}:queue:{model}` ZSET, `{p}:job:{id}`,
`{p}:result:{id}`) are read only to answer jobs a v1 producer left (worker/v1_leftovers.py).

A job's keys (wire/lanes.py) carry its shard's hash tag {T} ("s0" with one
shard), and a job id is "T.random", naming its shard:

    {p}:{T}:lane:{model}   LIST  job values (envelope JSON, "\\n", body) up to 32 KiB, and
                           batches of them; LPUSH in, workers BLMOVE the tail into an active list
    {p}:{T}:heavy:{model}  LIST  larger job values: the same, claimed by a loop of their own
    {p}:{T}:job:{id}       STR   "P" + the job's envelope line while it is pending,
                           then its result value (PX = job expiry, then result TTL)
    {p}:{T}:out:{id}       STR   a result over 64 KiB on its way in: SET by the worker,
                           renamed onto the job key by `finish_large` (PX = result TTL)
    {p}:{T}:active:{worker}:{model}:{n}  LIST  the one job value claim slot n of a
                           worker holds; its DEL fences the result write
    {p}:{T}:batched:{model}  STR  jobs in the lane's (or held) batches beyond one per batch,
                           so queue depth counts jobs: LLEN lane + this
    {p}:{T}:claims         SET   active list names, for recovering a dead worker's jobs
    {p}:{T}:idem:{scope}:{h}  STR  an Idempotency-Key's job ("job-id fingerprint")
    {p}:{T}:done:{reply_to}  SHARD CHANNEL  on a Redis Cluster, a shard's notifications
                           (SPUBLISH in the finish script: it must be in the script's slot)

On a Redis Cluster (`Keys(prefix, cluster=True)`) the heartbeat keys take the
hash tag {hb} ({p}:{hb}:worker:{id}, {p}:{hb}:workers, {p}:{hb}:activity:{id}),
so the registry, its heartbeats and the workers' activity are read in one
slot.

Nothing else builds a key name: a key is found by reading this file.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Keys:
    """Key names for one deployment prefix."""

    prefix: str = "derender"
    cluster: bool = False
    """A Redis Cluster: keys read together share a hash tag (module docstring)."""

    def done(self, reply_to: str) -> str:
        return f"{self.prefix}:done:{reply_to}"

    def worker(self, worker_id: str) -> str:
        return f"{self._heartbeats}:worker:{worker_id}"

    def activity(self, worker_id: str) -> str:
        return f"{self._heartbeats}:activity:{worker_id}"

    @property
    def workers(self) -> str:
        return f"{self._heartbeats}:workers"

    @property
    def _heartbeats(self) -> str:
        return f"{self.prefix}:{{hb}}" if self.cluster else self.prefix

    @property
    def stream_secret(self) -> str:
        return f"{self.prefix}:stream-secret"

    @property
    def owner_secret(self) -> str:
        return f"{self.prefix}:owner-secret"

    def held(self, key: bytes) -> str:
        return f"{self.prefix}:held:{key.hex()}"

    # Keys of shard `tag` (docs/wire-format.md).
    def lane(self, tag: str, model: str) -> str:
        return f"{self.prefix}:{{{tag}}}:lane:{model}"

    def heavy_lane(self, tag: str, model: str) -> str:
        return f"{self.prefix}:{{{tag}}}:heavy:{model}"

    def job(self, job_id: str) -> str:
        return f"{self.prefix}:{{{shard_of(job_id)}}}:job:{job_id}"

    def out(self, job_id: str) -> str:
        return f"{self.prefix}:{{{shard_of(job_id)}}}:out:{job_id}"

    def active(self, tag: str, worker_id: str, model: str, n: int) -> str:
        return f"{self.prefix}:{{{tag}}}:active:{worker_id}:{model}:{n}"

    def batched(self, tag: str, model: str) -> str:
        return f"{self.prefix}:{{{tag}}}:batched:{model}"

    def claims(self, tag: str) -> str:
        return f"{self.prefix}:{{{tag}}}:claims"

    def idempotency(self, tag: str, scope: str, key_hash: str) -> str:
        return f"{self.prefix}:{{{tag}}}:idem:{scope}:{key_hash}"

    def shard_done(self, tag: str, reply_to: str) -> str:
        return f"{self.prefix}:{{{tag}}}:done:{reply_to}"

    # Wire format v1's, read only to answer what a v1 producer left (worker/v1_leftovers.py).
    def v1_queue(self, model: str) -> str:
        return f"{self.prefix}:queue:{model}"

    def v1_job(self, job_id: str) -> str:
        return f"{self.prefix}:job:{job_id}"

    def v1_result(self, job_id: str) -> str:
        return f"{self.prefix}:result:{job_id}"


def random_id() -> str:
    """128 random bits, URL-safe: unguessable (reply channels, request ids)."""
    return secrets.token_urlsafe(16)


def new_job_id(tag: str) -> str:
    """A job id: its shard's tag, ".", 128 random bits (unguessable, so an id
    doubles as a read capability)."""
    return f"{tag}.{secrets.token_urlsafe(16)}"


def shard_of(job_id: str) -> str | None:
    """The shard tag a job id names; None for an id that names none (no ".")."""
    tag, dot, _ = job_id.partition(".")
    return tag if dot else None


def tag_in(key: str) -> str:
    """The hash tag of a key name: what its first "{...}" holds."""
    return key[key.index("{") + 1 : key.index("}")]


def parse_active(active_key: str) -> tuple[str, str]:
    """(worker id, model) of an active list's name (`Keys.active`)."""
    rest = active_key.split(":active:", 1)[1].rsplit(":", 1)[0]
    worker_id, _, model = rest.partition(":")
    return worker_id, model


def now_ms() -> int:
    return time.time_ns() // 1_000_000
