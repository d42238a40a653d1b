"""Tool call ids, shaped like vLLM 0.33's ``make_tool_call_id("random")``."""

from __future__ import annotations

import uuid

_MASK_64_BITS = (1 << 64) - 1


def make_tool_call_id() -> str:
    # vLLM: f"chatcmpl-tool-{random_uuid()}", random_uuid = 16 hex chars of
    # the low 64 bits of a uuid4.  (The "kimi_k2" id type never applies to
    # the DeepSeek/Hermes parsers built here.)
    return f"chatcmpl-tool-{uuid.uuid4().int & _MASK_64_BITS:016x}"
