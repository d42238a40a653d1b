"""The model a request body names, read from its head when it can be.

The API and `DerenderClient` route a body by its `model` before any worker
parses it. When `model` is the body's first member (after an optional
`"stream": true|false`, as OpenAI clients write them), its first 4 KiB
suffice; otherwise the whole body is scanned (msgspec, about 1 ms per MB).
"""

from __future__ import annotations

import re

import msgspec

_HEAD = re.compile(
    rb'\s*\{\s*(?:"stream"\s*:\s*(?:true|false)\s*,\s*)?"model"\s*:\s*(null|"(?:[^"\\]|\\.)*")\s*[,}]'
)


class _ModelOnly(msgspec.Struct):
    model: str | None = None


_model_only = msgspec.json.Decoder(_ModelOnly)


def model_named(body: bytes) -> str | None:
    """The body's top-level `model` (None when it names none or null).
    Raises msgspec.DecodeError (not JSON; for a head match, a bad escape in
    the name) or ValidationError (a `model` that is not a string)."""
    head = _HEAD.match(body, 0, 4096)
    if head is not None:
        name: str | None = msgspec.json.decode(head.group(1))  # a JSON string, or null
        return name
    return _model_only.decode(body).model
