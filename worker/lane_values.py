"""What a claimed lane value holds: the jobs to run, and drops counted.

Producers LPUSH lane values directly (docs/security.md), so a value may be
anything. Its headers are read with frames.py's bounds; each job in it must
name the lane's shard (a job id without one, or of another shard, has a job
key no finish of this lane can write: its result would be lost, or on a
Redis Cluster its finish would fail for ever). Whatever cannot run is counted
in `derender_worker_job_start_failures_total` by reason and logged, never
with its bytes: `unreadable` (no job there, so no one to answer),
`bad_frame` (a batch frame breaking a bound: the jobs before the break run
and are answered), `wrong_shard`, and `malformed_job`: a value whose envelope
is not a job's, but names a job id of the lane's shard, is answered with a
400 error result there (its producer is waiting on that key).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import msgspec

from derender_queue.wire.envelope import JobEnvelope, WireError, unpack_job
from derender_queue.wire.frames import BATCH_MARK, split_attempt, unpack_batch
from derender_queue.wire.keys import now_ms, shard_of
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
    malformed: dict[str, str] = field(default_factory=dict)
    """Jobs (among `jobs`, with a stand-in envelope) to answer with a 400: id -> what is wrong."""


class _Named(msgspec.Struct):
    """What an envelope that is not a job's may still tell: whom to answer."""

    id: str
    reply_to: str | None = None


_named = msgspec.json.Decoder(_Named)


def read_claim(value: bytes, tag: str) -> Claimed:
    """The jobs of a lane value claimed from shard `tag`'s lane."""
    try:
        attempt, job = split_attempt(value)
    except ValueError as exc:
        _drop("unreadable", f"dropped a lane value: {exc}")
        return Claimed()
    claimed = Claimed(attempt, size=len(job))
    if not job.startswith(BATCH_MARK):
        _read_job(claimed, job, tag, "a lane value")
        return claimed
    frame = unpack_batch(job)
    if frame.problem:
        _drop("bad_frame", f"a batch frame with {frame.problem}: its {len(frame.items)} item(s) before that "
                           "are read, the rest dropped")
    claimed.batch, claimed.counted = True, frame.counted
    for item in frame.items:
        _read_job(claimed, item, tag, "a batch item")
    return claimed


def _read_job(claimed: Claimed, value: bytes, tag: str, what: str) -> None:
    try:
        envelope, body = unpack_job(value)
    except WireError as exc:
        named = _answerable(value, tag)
        if named is None:
            _drop("unreadable", f"dropped {what} that is not a job ({exc})")
            return
        metrics.START_FAILURES.labels("malformed_job").inc()
        log.info("%s is not a job (%s): answered with a 400", what, exc, extra={"job_id": named.id[:64]})
        envelope = JobEnvelope(v=2, id=named.id, endpoint="chat", model="", enqueued_ms=now_ms(),
                               reply_to=named.reply_to)
        claimed.jobs.append((envelope, b""))
        claimed.malformed[named.id] = str(exc)
        return
    if shard_of(envelope.id) != tag:
        _drop("wrong_shard", f"dropped {what} whose job id names no shard or not its lane's ({tag}): "
                             "no result could be written for it")
        return
    claimed.jobs.append((envelope, body))


def _answerable(value: bytes, tag: str) -> _Named | None:
    """Whom to answer for a value whose envelope is not a job's: its id, when
    its envelope line is a JSON object with a string id of shard `tag`."""
    cut = value.find(b"\n")
    try:
        named = _named.decode(value[:cut] if cut >= 0 else value)
    except (msgspec.MsgspecError, RecursionError):
        return None
    return named if shard_of(named.id) == tag else None


def _drop(reason: str, message: str) -> None:
    metrics.START_FAILURES.labels(reason).inc()
    log.warning(message)
