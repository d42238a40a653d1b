"""Optional API keys: `DERENDER_API_KEYS="name:token,other:token2"`.

When configured, every route but `/health` wants `Authorization: Bearer
<token>`; tokens are compared in constant time and a refusal never says
why. The key's name is the client's scope: its jobs and idempotency keys are
invisible to other keys. (Parsed and checked by `Settings.api_key_names`.)
"""

from __future__ import annotations

import hmac

from derender_queue.errors import DerenderError


def principal(keys: dict[str, str], authorization: str | None) -> str:
    """The caller's scope, or a 401."""
    if not keys:
        return "public"
    scheme, _, presented = (authorization or "").partition(" ")
    if scheme.lower() == "bearer":
        match = None
        for token, name in keys.items():  # every key compared: no timing hint
            if hmac.compare_digest(token.encode(), presented.encode()):
                match = name
        if match is not None:
            return match
    raise DerenderError("Unauthorized", status=401)
