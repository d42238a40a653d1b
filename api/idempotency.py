"""`Idempotency-Key` on `POST /v1/jobs`: the same key, endpoint and body give
the same job; the same key with another endpoint or body is a 409.

The key is bound to its job in the transaction that stores and queues the
job (wire/queue.py `submit_once`): a retry after a failed or timed-out first
try either finds the job that try really enqueued, or enqueues it now;
never a key naming a job that does not exist.
"""

from __future__ import annotations

import hashlib
from typing import Any

from derender_queue.contract.types import JobKind
from derender_queue.errors import DerenderError
from derender_queue.wire.queue import Slot

from .state import ApiState


async def submit_idempotent(state: ApiState, scope: str, key: str, endpoint: JobKind, body: bytes, model: str,
                            **job: Any) -> tuple[str, bool]:
    """(job id, whether this call enqueued it); keys are per caller `scope`,
    which owns the job. A new job's id is of the slot's shard (wire format v2:
    the script that binds them runs in one slot)."""
    fingerprint = f"{endpoint}:{hashlib.sha256(body).hexdigest()}"
    slot = Slot(state.queue.idempotency_key(scope, hashlib.sha256(key.encode()).hexdigest()), fingerprint,
                state.settings.job_ttl_s)
    job_id = state.queue.id_for_slot(slot.key)
    sig = await state.owners.sign(job_id, scope)
    job_id, bound = await state.queue.submit_once(slot, endpoint, body, model, job_id=job_id, owner=scope,
                                                  owner_sig=sig, **job)
    if bound is None:
        return job_id, True
    if bound == fingerprint:
        return job_id, False
    raise DerenderError("Idempotency-Key was already used with a different endpoint or request body", status=409)
