"""Fields a derender response passes on from the generate response.

They arrive as raw JSON so the common case (absent) costs nothing; when
present they are checked against vLLM's types and re-encoded the way vLLM's
pydantic models dump them (missing keys as null, unknown metrics keys kept).
"""

from __future__ import annotations

import uuid
from typing import TypeVar

import msgspec

from derender_queue.contract.requests import PerRequestMetrics, PromptLogprob
from derender_queue.contract.types import NULL, is_null
from derender_queue.errors import bad_request

from .logprobs import correct_decoded_token
from .vocab import Vocab

T = TypeVar("T")
_PromptLogprobs = list[dict[int, PromptLogprob] | None]


def response_id(request_id: str | None) -> str:
    """The generate response's `request_id`, else a fresh one."""
    return request_id if request_id is not None else str(uuid.uuid4())


def metrics(raw: msgspec.Raw, where: str) -> msgspec.Raw:
    if is_null(raw):
        return NULL
    typed = _decode(raw, PerRequestMetrics, f"{where}.metrics")
    known = PerRequestMetrics.__struct_fields__
    extra = {k: v for k, v in msgspec.json.decode(raw).items() if k not in known}
    return msgspec.Raw(msgspec.json.encode(msgspec.to_builtins(typed) | extra))


def prompt_logprobs(raw: msgspec.Raw, where: str, vocab: Vocab | None = None) -> msgspec.Raw:
    """As given, or with `vocab` (compat.Profile.decode_prompt_logprobs) the
    missing `decoded_token`s decoded."""
    if is_null(raw):
        return NULL
    typed = _decode(raw, _PromptLogprobs, f"{where}.prompt_logprobs")
    if vocab is not None:
        _decode_tokens(typed, vocab)
    return msgspec.Raw(msgspec.json.encode(typed))


def _decode_tokens(entries: _PromptLogprobs, vocab: Vocab) -> None:
    """vLLM 0.34's `_resolve_prompt_logprobs`: each id's own decode (an id
    outside the vocabulary is ""), a U+FFFD ending repaired with the prompt
    tokens before it (the first id of each earlier position)."""
    if all(lp.decoded_token is not None for entry in entries if entry for lp in entry.values()):
        return
    single, size = vocab.single_text, vocab.size
    context: list[int] = []
    for entry in entries:
        if not entry:
            continue
        for tid, lp in entry.items():
            if lp.decoded_token is None:
                text = single[tid] if 0 <= tid < size else ""
                if text.endswith("\ufffd") and all(0 <= t < size for t in context[-4:]):
                    text = correct_decoded_token(vocab, tid, context)
                lp.decoded_token = text
        context.append(next(iter(entry)))


def _decode(raw: msgspec.Raw, kind: type[T], where: str) -> T:
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.ValidationError as exc:
        raise bad_request(f"Invalid request: {exc} (in {where})", param=where) from None
