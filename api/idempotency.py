"""`Idempotency-Key` on `POST /v1/jobs`: the same key and body give the same job."""

from __future__ import annotations

import hashlib

from derender_queue.errors import DerenderError
from derender_queue.wire.keys import new_job_id

from .state import ApiState


async def idempotent_job_id(state: ApiState, owner: str, key: str, body: bytes) -> tuple[str, bool]:
    """The job id bound to (owner, key): a new one, or the existing one for the
    same body; a different body under the same key is a 409."""
    digest = hashlib.sha256(body).hexdigest()
    slot = state.keys.idempotency(owner, hashlib.sha256(key.encode()).hexdigest())
    job_id = new_job_id()
    if await state.redis.set(slot, f"{job_id} {digest}", nx=True, ex=state.settings.job_ttl_s):
        return job_id, True
    existing = (await state.redis.get(slot) or b"").decode().split(" ")
    if len(existing) == 2 and existing[1] == digest:
        return existing[0], False
    raise DerenderError("Idempotency-Key was already used with a different request body", status=409)
