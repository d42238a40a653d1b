"""Shared scalar types of the contract: token ids and raw pass-through JSON."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, Raw

TokenId = Annotated[int, Meta(ge=0)]
NULL = Raw(b"null")
"""Pass-through JSON values are `Raw` (any JSON, null included), never re-parsed."""

Endpoint = Literal["chat", "completion"]
"""The two derender endpoints: `/v1/chat/completions/derender`, `/v1/completions/derender`."""

JobKind = Literal["chat", "completion", "step"]
"""What a queued job is: a derender body of one of the endpoints, or an
engine step (contract/step_requests.py) carrying many streams' chunks."""


def null() -> Raw:
    return NULL


def is_null(raw: Raw) -> bool:
    return raw is NULL or bytes(raw) == b"null"  # an absent field's default is NULL itself
