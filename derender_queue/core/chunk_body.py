"""A streamed chunk's body, its request options decoded once, not per chunk.

Every chunk of a stream repeats the request's options (`chat_request` /
`completion_request`): with tools, kilobytes whose typed decode, and the
encoding the state binds (stream_state.options_bytes), were a third of a
tool-streaming chunk's cost. So the body is first decoded with the options
left as raw JSON. Options whose bytes were seen before reuse their decoded
form and its encoding; new ones take body.py's full decode of the whole body,
so every error is the one, in the order, that decode gives. Equal bytes
decode equally, so a reused form is the one a full decode would give; it is
shared by the requests that use it, and nothing writes to options.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from derender_queue.contract import (
    DerenderChatStreamRequest,
    DerenderCompletionStreamRequest,
)

from .body import decode_body, normalise
from .stream_state import options_bytes


class _ChatRaw(DerenderChatStreamRequest, kw_only=True):
    chat_request: msgspec.Raw = msgspec.Raw()  # type: ignore[assignment]  # raw until looked up


class _CompletionRaw(DerenderCompletionStreamRequest, kw_only=True):
    completion_request: msgspec.Raw = msgspec.Raw()  # type: ignore[assignment]  # raw until looked up


# Distinct options remembered (count, raw bytes), then all forgotten at once. Decoded options
# take ~6x their JSON (tools are dicts), so 4 MiB of raw bytes holds ~25 MB per process.
_KEPT, _KEPT_BYTES = 1024, 4 << 20
_NONE: dict[bytes, tuple[Any, bytes]] = {b"": (None, b""), b"null": (None, b"")}  # absent or null: options_bytes(None)
ChatChunk = tuple[DerenderChatStreamRequest, bytes]
"""The request and `options_bytes` of its options (the state binds them)."""
CompletionChunk = tuple[DerenderCompletionStreamRequest, bytes]


class _Options:
    """One request type's memo: raw options bytes -> (decoded options, their options_bytes)."""

    def __init__(self, kind: type, lite: type, field: str) -> None:
        """`lite`: `kind` with its options `field` left raw."""
        self._kind, self._field = kind, field
        self._lite: Callable[[bytes], Any] = msgspec.json.Decoder(lite).decode
        self.forms = dict(_NONE)
        self.size = 0

    def decode(self, body: bytes) -> tuple[Any, bytes]:
        try:
            lite = self._lite(body)
        except (msgspec.DecodeError, RecursionError):  # the full decode gives its error, or a second pass
            raw = None
        else:
            raw = bytes(getattr(lite, self._field))
            known = self.forms.get(raw)
            if known is not None:
                setattr(lite, self._field, known[0])
                return normalise(lite), known[1]
        request = decode_body(body, self._kind)
        return request, self._learn(raw, getattr(request, self._field))

    def _learn(self, raw: bytes | None, options: Any) -> bytes:
        key = options_bytes(options)
        if raw is not None and options is not None:
            if len(self.forms) >= _KEPT + len(_NONE) or self.size + len(raw) > _KEPT_BYTES:
                self.forms, self.size = dict(_NONE), 0  # one swap: threads reading the old dict finish with it
            self.forms[raw] = (options, key)
            self.size += len(raw)
        return key


class ChunkDecoder:
    """Decodes chunk bodies; one instance serves a process's threads."""

    def __init__(self) -> None:
        self._chat = _Options(DerenderChatStreamRequest, _ChatRaw, "chat_request")
        self._completion = _Options(DerenderCompletionStreamRequest, _CompletionRaw, "completion_request")

    def chat(self, body: bytes) -> ChatChunk:
        return self._chat.decode(body)

    def completion(self, body: bytes) -> CompletionChunk:
        return self._completion.decode(body)
