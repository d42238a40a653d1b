"""Every Redis key name, for one deployment prefix (README "Wire format").

Every key lives under one prefix (`DERENDER_KEY_PREFIX`, default `derender`):

    {p}:queue:{model}   ZSET  job ids, score = enqueue time in ms (lower runs sooner)
    {p}:wake:{model}    LIST  LPUSH the job id per enqueue (or "1": "read the queue"); idle
                        workers BRPOP it instead of polling; LTRIM 0 63 keeps it short
    {p}:job:{id}        STR   job: envelope JSON, "\\n", request body (PX = job expiry)
    {p}:result:{id}     STR   result: envelope JSON, "\\n", response body (PX = result TTL)
    {p}:done:{reply_to} PUBSUB  when a result is written: the job id, and for results up to
                        64 KiB also "\n" and the result value (saves the waiter a GET)
    {p}:worker:{id}     STR   a live worker's heartbeat JSON (PX = 3 heartbeats)
    {p}:workers         ZSET  worker ids, score = when their heartbeat expires (ms)
    {p}:idem:{scope}:{h} STR  "job-id body-sha256" for an Idempotency-Key (EX = job TTL)
    {p}:in-progress:{id} STR  a worker's claim on a job (PX = lease, renewed while it runs)
    {p}:retry:{id}      STR   arq's attempt counter for a job
    {p}:health:{model}  STR   arq's worker health line for a model's queue
    {p}:stream-secret   STR   the streaming HMAC key workers share when none is configured
    {p}:owner-secret    STR   the API's key for signing job owners when none is configured
                        (no producer may read it: README "Security")

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

    def queue(self, model: str) -> str:
        return f"{self.prefix}:queue:{model}"

    def wake(self, model: str) -> str:
        return f"{self.prefix}:wake:{model}"

    def job(self, job_id: str) -> str:
        return f"{self.prefix}:job:{job_id}"

    def result(self, job_id: str) -> str:
        return f"{self.prefix}:result:{job_id}"

    def done(self, reply_to: str) -> str:
        return f"{self.prefix}:done:{reply_to}"

    def worker(self, worker_id: str) -> str:
        return f"{self.prefix}:worker:{worker_id}"

    def idempotency(self, scope: str, key_hash: str) -> str:
        return f"{self.prefix}:idem:{scope}:{key_hash}"

    @property
    def workers(self) -> str:
        return f"{self.prefix}:workers"

    def health(self, model: str) -> str:
        return f"{self.prefix}:health:{model}"

    @property
    def stream_secret(self) -> str:
        return f"{self.prefix}:stream-secret"

    @property
    def owner_secret(self) -> str:
        return f"{self.prefix}:owner-secret"

    @property
    def arq_prefixes(self) -> dict[str, str]:
        """arq's own bookkeeping keys, moved under our prefix."""
        return {
            "job_key_prefix": f"{self.prefix}:job:",
            "in_progress_key_prefix": f"{self.prefix}:in-progress:",
            "retry_key_prefix": f"{self.prefix}:retry:",
            "result_key_prefix": f"{self.prefix}:arq-result:",
            "abort_jobs_ss": f"{self.prefix}:abort",
            "health_check_key_suffix": ":health-check",
        }




def new_job_id() -> str:
    """128 random bits, URL-safe: unguessable, so ids double as read capabilities."""
    return secrets.token_urlsafe(16)


def now_ms() -> int:
    return time.time_ns() // 1_000_000
