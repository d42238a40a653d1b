"""Tool call ids, shaped like vLLM's ``make_tool_call_id("random")``."""

from __future__ import annotations

import hashlib
import uuid

_MASK_64_BITS = (1 << 64) - 1


def make_tool_call_id() -> str:
    # vLLM: f"chatcmpl-tool-{random_uuid()}", random_uuid = 16 hex chars of
    # the low 64 bits of a uuid4.  (The "kimi_k2" id type never applies to
    # the DeepSeek/Hermes parsers built here.)
    return f"chatcmpl-tool-{uuid.uuid4().int & _MASK_64_BITS:016x}"


def stable_tool_call_id(request: bytes, choice: int, fed: int, call: int) -> str:
    """A streamed call's id, drawn from where it is (the request id as bound,
    the choice, the ids fed before its chunk, its index): a retried chunk
    with the same state gives the same ids. Spelled as the random ones."""
    digest = hashlib.blake2b(b"%s|%d|%d|%d" % (request, choice, fed, call), digest_size=8)
    return f"chatcmpl-tool-{digest.hexdigest()}"
