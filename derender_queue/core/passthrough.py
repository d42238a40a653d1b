"""Fields a derender response passes on from the generate response.

They arrive as raw JSON so the common case (absent) costs nothing; when
present they are checked against vLLM's types and re-encoded the way vLLM's
pydantic models dump them (missing keys as null, unknown metrics keys kept).
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

from derender_queue.contract import NULL, PerRequestMetrics, PromptLogprob, is_null
from derender_queue.errors import bad_request

T = TypeVar("T")
_PromptLogprobs = list[dict[int, PromptLogprob] | None]


def metrics(raw: msgspec.Raw, where: str) -> msgspec.Raw:
    if is_null(raw):
        return NULL
    typed = _decode(raw, PerRequestMetrics, f"{where}.metrics")
    known = PerRequestMetrics.__struct_fields__
    extra = {k: v for k, v in msgspec.json.decode(raw).items() if k not in known}
    return msgspec.Raw(msgspec.json.encode(msgspec.to_builtins(typed) | extra))


def prompt_logprobs(raw: msgspec.Raw, where: str) -> msgspec.Raw:
    if is_null(raw):
        return NULL
    typed = _decode(raw, _PromptLogprobs, f"{where}.prompt_logprobs")
    return msgspec.Raw(msgspec.json.encode(typed))


def _decode(raw: msgspec.Raw, kind: type[T], where: str) -> T:
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.ValidationError as exc:
        raise bad_request(f"Invalid request: {exc} (in {where})", param=where) from None
