"""What a claimed lane value holds: the jobs to run, and drops counted.

Producers LPUSH lane values directly (docs/security.md), so a value may be
anything. Its headers are read with frames.py's bounds; each job in it must
name the lane's shard (a job id without one, or of another shard, has a job
key no finish of this lane can write: its result would be lost, or on a
Redis Cluster its finish would fail for ever). Whatever cannot run is counted
in `derender_worker_job_start_failures_total` by reason and logged, never
with its bytes: `unreadable` (no job there, so no one to answer),
`bad_frame` (a batch frame breaking a bound: the jobs before the break run
and are answered), `wrong_shard`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from derender_queue.wire.envelope import JobEnvelope, WireError, unpack_job
from derender_queue.wire.frames import BATCH_MARK, split_attempt, unpack_batch
from derender_queue.wire.keys import shard_of
from worker import metrics

log = logging.getLogger("derender.worker")


@dataclass
class Claimed:
    attempt: int = 1
    jobs: list[tuple[JobEnvelope, bytes]] = field(default_factory=list)
    batch: bool = False
    counted: int = 1
    """Jobs the value counts in the lane's batched counter (a frame's `counted`)."""
    size: int = 0
    """The job value's bytes (a heavy one is checked for withdrawal first)."""


def read_claim(value: bytes, tag: str) -> Claimed:
    """The jobs of a lane value claimed from shard `tag`'s lane."""
    try:
        attempt, job = split_attempt(value)
    except ValueError as exc:
        _drop("unreadable", f"dropped a lane value: {exc}")
        return Claimed()
    if not job.startswith(BATCH_MARK):
        one = _job(job, tag, "a lane value")
        return Claimed(attempt, [one] if one else [], size=len(job))
    frame = unpack_batch(job)
    if frame.problem:
        _drop("bad_frame", f"a batch frame with {frame.problem}: its {len(frame.items)} item(s) before that "
                           "are read, the rest dropped")
    jobs = [one for item in frame.items if (one := _job(item, tag, "a batch item"))]
    return Claimed(attempt, jobs, True, frame.counted, len(job))


def _job(value: bytes, tag: str, what: str) -> tuple[JobEnvelope, bytes] | None:
    try:
        envelope, body = unpack_job(value)
    except WireError as exc:
        _drop("unreadable", f"dropped {what} that is not a job ({exc})")
        return None
    if shard_of(envelope.id) != tag:
        _drop("wrong_shard", f"dropped {what} whose job id names no shard or not its lane's ({tag}): "
                             "no result could be written for it")
        return None
    return envelope, body


def _drop(reason: str, message: str) -> None:
    metrics.START_FAILURES.labels(reason).inc()
    log.warning(message)
