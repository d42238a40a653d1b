"""The values of jobs, results and notifications (docs/wire-format.md).

Key names are in `keys.py`.

A value is a one-line JSON envelope, a newline, then the body bytes exactly as
sent or returned: nobody has to parse (or copy through a parser) a 5 MB body
to route it, and the API returns the worker's bytes unchanged. Compact JSON
never contains a raw newline, so the first "\\n" always ends the envelope.
No pickle anywhere: a value that is not this format is answered with an error
result, never executed.
"""

from __future__ import annotations

import msgspec

from derender_queue.contract.types import JobKind

VERSION = 1
READABLE_VERSIONS = (1, 2)
"""Job envelopes workers read: v1's, and v2's (the same fields, from a lane)."""


class JobEnvelope(msgspec.Struct, kw_only=True, omit_defaults=True):
    v: int
    id: str
    endpoint: JobKind
    model: str
    """Served model name: picks the queue, overrides the body's `model`."""
    enqueued_ms: int
    reply_to: str | None = None
    """Channel suffix to notify on completion (`{p}:done:{reply_to}`)."""
    deadline_ms: int | None = None
    """Not started by then: answered with an expiry error instead."""
    owner: str | None = None
    """Scope of the client that submitted it (reads are scoped to it)."""
    owner_sig: str | None = None
    """The API's HMAC over id and owner: an owner without a valid one is
    ignored (producers can write any owner; api/owner.py)."""
    trace: dict[str, str] | None = None
    """`x-request-id` / `traceparent` carried into the worker's logs."""


class ResultEnvelope(msgspec.Struct, kw_only=True, omit_defaults=True):
    v: int
    id: str
    status: int
    """HTTP status the API answers with: 200, or the error's 4xx/5xx."""
    model: str | None = None
    tokenizer_sha256: str | None = None
    worker: str | None = None
    finished_ms: int
    owner: str | None = None
    owner_sig: str | None = None
    """Copied unchanged from the job's envelope."""
    trace: dict[str, str] | None = None


_job_decoder = msgspec.json.Decoder(JobEnvelope)
_result_decoder = msgspec.json.Decoder(ResultEnvelope)
_encode = msgspec.json.encode


class WireError(ValueError):
    """A value in Redis that is not in the wire format."""


INLINE_RESULT_BYTES = 64 * 1024
"""Larger results are only announced: big pub/sub messages risk Redis's
output-buffer limit for subscribers."""


def notification(job_id: str, result_value: bytes) -> bytes:
    if len(result_value) <= INLINE_RESULT_BYTES:
        return job_id.encode() + b"\n" + result_value
    return job_id.encode()


def parse_notification(message: bytes) -> tuple[str, bytes | None]:
    """(job id, result value if it came inline)."""
    cut = message.find(b"\n")
    if cut < 0:
        return message.decode(), None
    return message[:cut].decode(), message[cut + 1 :]


def parse_notifications(message: bytes) -> list[tuple[str, bytes | None]]:
    """Every (job id, inline result value) a notification carries: one, or for
    a batch's ("*", then per job "<id> <length>\\n" and the value, length -1
    when it is not inline) several."""
    if not message.startswith(b"*"):
        return [parse_notification(message)]
    out: list[tuple[str, bytes | None]] = []
    pos = 1
    while pos < len(message):
        cut = message.index(b"\n", pos)
        job_id, _, size = message[pos:cut].partition(b" ")
        length = int(size)
        value = message[cut + 1 : cut + 1 + length] if length >= 0 else None
        out.append((job_id.decode(), value))
        pos = cut + 1 + max(length, 0)
    return out


def pack(envelope: msgspec.Struct, body: bytes | bytearray) -> bytes:
    return _encode(envelope) + b"\n" + body


def split(value: bytes) -> tuple[bytes, bytes]:
    cut = _line_end(value)
    return value[:cut], value[cut + 1 :]


def _line_end(value: bytes) -> int:
    """Where the envelope line ends (its newline)."""
    cut = value.find(b"\n")
    if cut < 0:
        raise WireError("no envelope line (expected JSON envelope, newline, body)")
    return cut


def unpack_job(value: bytes) -> tuple[JobEnvelope, bytes]:
    head, body = split(value)
    try:
        envelope = _job_decoder.decode(head)
    except msgspec.MsgspecError as exc:
        raise WireError(f"invalid job envelope: {exc}") from None
    except RecursionError:  # msgspec's answer to JSON nested too deep (a producer wrote it)
        raise WireError("invalid job envelope: nested too deep") from None
    if envelope.v not in READABLE_VERSIONS:
        raise WireError(f"unsupported job wire version {envelope.v} (this worker speaks 1 and 2)")
    return envelope, body


ENVELOPE_PEEK_BYTES = 4096
"""Enough for any envelope line the API writes (it caps what it carries in
`trace`), so `peek_job` can learn a job's owner without reading its body."""


def peek_job(head: bytes) -> JobEnvelope | None:
    """The envelope at the start of a job value (its first bytes, e.g. from
    GETRANGE), or None when those bytes hold no whole, valid envelope line."""
    cut = head.find(b"\n")
    if cut < 0:
        return None
    try:
        return _job_decoder.decode(head[:cut])
    except (msgspec.MsgspecError, RecursionError):  # RecursionError: nested too deep
        return None


def result_view(value: bytes) -> tuple[ResultEnvelope, memoryview]:
    """A result value's envelope and a view of its body: a heavy result is
    megabytes, which the API sends on as they are."""
    view, cut = memoryview(value), _line_end(value)
    try:
        envelope = _result_decoder.decode(view[:cut])
    except msgspec.MsgspecError as exc:
        raise WireError(f"invalid result envelope: {exc}") from None
    except RecursionError:
        raise WireError("invalid result envelope: nested too deep") from None
    return envelope, view[cut + 1 :]
