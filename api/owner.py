"""Whose job is this: an owner counts only when this API vouched for it.

Producers on Redis can write any `owner` into a job or a result envelope, so
the API signs what it writes: `owner_sig` = HMAC-SHA256 over the job id and
the owner, with a key producers cannot read (`DERENDER_OWNER_SECRET`, or one
generated on first use and kept at `{p}:owner-secret`, outside every key
pattern the producer ACL grants). Workers copy owner and signature into the
result unchanged. An owner whose signature does not verify is ignored: the
job is then no one's, readable by whoever holds its id, like any job a
producer enqueued itself.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from redis.asyncio import Redis

from derender_queue.wire.keys import Keys

_DOMAIN = b"derender owner v1\0"


class OwnerSeal:
    def __init__(self, redis: Redis, keys: Keys, configured: str | None = None) -> None:
        self.redis = redis
        self.keys = keys
        self._key: bytes | None = configured.encode() if configured else None

    async def _secret(self) -> bytes:
        """The configured key, or the deployment's shared one (created once;
        every API process reads the same). Fetched on first use, so an API
        started while Redis is down still starts."""
        if self._key is None:
            await self.redis.set(self.keys.owner_secret, secrets.token_hex(32), nx=True)
            value = await self.redis.get(self.keys.owner_secret)
            if not value:
                raise ConnectionError("owner secret missing from Redis")
            self._key = bytes(value)
        return self._key

    async def sign(self, job_id: str, owner: str) -> str:
        return _mac(await self._secret(), job_id, owner)

    async def owner(self, job_id: str, owner: str | None, owner_sig: str | None) -> str | None:
        """`owner` if this API signed it for this job, else None (no one's)."""
        if owner is None or owner_sig is None:
            return None
        expected = _mac(await self._secret(), job_id, owner)
        return owner if hmac.compare_digest(expected.encode(), owner_sig.encode("utf-8", "surrogatepass")) else None


def _mac(key: bytes, job_id: str, owner: str) -> str:
    message = _DOMAIN + job_id.encode("utf-8", "surrogatepass") + b"\0" + owner.encode("utf-8", "surrogatepass")
    return hmac.new(key, message, hashlib.sha256).hexdigest()
