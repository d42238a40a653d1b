"""A streamed chunk's body, its request options and prompt ids decoded once,
not per chunk.

Every chunk of a stream repeats the request's options (`chat_request` /
`completion_request`): with tools, kilobytes whose typed decode, and the
encoding the state binds (stream_state.options_bytes), were a third of a
tool-streaming chunk's cost. And with a parser every chunk repeats the whole
prompt's ids (vLLM asks for the full list there), thousands of integers to
decode when only the first chunk reads them. So the body is first decoded
with both left as raw JSON. Raw bytes seen before reuse their decoded form
(and the options their encoding); new ones take body.py's full decode of the
whole body, so every error is the one, in the order, that decode gives.
Equal bytes decode equally, so a reused form is the one a full decode would
give; it is shared by the requests that use it, and nothing writes to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import msgspec

from derender_queue.contract.stream_requests import DerenderChatStreamRequest, DerenderCompletionStreamRequest
from derender_queue.contract.types import TokenId

from .body import decode_body, normalise
from .stream_state import options_bytes


class _ChatRaw(DerenderChatStreamRequest, kw_only=True):
    chat_request: msgspec.Raw = msgspec.Raw()  # type: ignore[assignment]  # raw until looked up
    prompt_token_ids: msgspec.Raw = msgspec.Raw()  # type: ignore[assignment]  # raw until looked up


class _CompletionRaw(DerenderCompletionStreamRequest, kw_only=True):
    completion_request: msgspec.Raw = msgspec.Raw()  # type: ignore[assignment]  # raw until looked up
    prompt_token_ids: msgspec.Raw = msgspec.Raw()  # type: ignore[assignment]  # raw until looked up


# Distinct raw values remembered per memo (count, raw bytes), then all forgotten at once.
# Decoded forms take several times their JSON (tools are dicts, ids are ints): the bound
# is on the raw bytes, per memo and process.
_KEPT, _KEPT_BYTES = 1024, 4 << 20
V = TypeVar("V")
ChatChunk = tuple[DerenderChatStreamRequest, bytes]
"""The request and `options_bytes` of its options (the state binds them)."""
CompletionChunk = tuple[DerenderCompletionStreamRequest, bytes]


class _Memo(Generic[V]):
    """Raw JSON bytes -> a decoded value, bounded by count and bytes."""

    def __init__(self, seeds: dict[bytes, V]) -> None:
        self._seeds = seeds
        self.known = dict(seeds)
        self.size = 0

    def learn(self, raw: bytes, value: V) -> None:
        if len(self.known) >= _KEPT + len(self._seeds) or self.size + len(raw) > _KEPT_BYTES:
            self.known, self.size = dict(self._seeds), 0  # one swap: threads reading the old dict finish with it
        self.known[raw] = value
        self.size += len(raw)


_UNSEEN: Any = object()
_decode_ids: Callable[[bytes], list[int] | None] = msgspec.json.Decoder(list[TokenId] | None).decode
"""Prompt ids typed as the request types them."""


class _Fields:
    """One request type's memos: its options (decoded, and their options_bytes) and prompt ids."""

    def __init__(self, kind: type, lite: type, field: str) -> None:
        """`lite`: `kind` with its options `field` and `prompt_token_ids` left raw."""
        self._kind, self._field = kind, field
        self._lite: Callable[[bytes], Any] = msgspec.json.Decoder(lite).decode
        # absent or null: options_bytes(None)
        self.options: _Memo[tuple[Any, bytes]] = _Memo({b"": (None, b""), b"null": (None, b"")})
        self.prompts: _Memo[list[int] | None] = _Memo({b"": None, b"null": None})

    def decode(self, body: bytes) -> tuple[Any, bytes]:
        try:
            lite = self._lite(body)
        except (msgspec.DecodeError, RecursionError):  # the full decode gives its error, or a second pass
            raw = ids_raw = None
        else:
            raw, ids_raw = bytes(getattr(lite, self._field)), bytes(lite.prompt_token_ids)
            known = self.options.known.get(raw)
            if known is not None:
                ids = self.prompts.known.get(ids_raw, _UNSEEN)
                if ids is _UNSEEN:  # a new stream's first chunk, mostly
                    ids = self._prompt(ids_raw)
                if ids is not _UNSEEN:
                    setattr(lite, self._field, known[0])
                    lite.prompt_token_ids = ids
                    return normalise(lite), known[1]
        request = decode_body(body, self._kind)
        options = getattr(request, self._field)
        key = options_bytes(options)
        if raw is not None and ids_raw is not None:
            if options is not None and raw not in self.options.known:
                self.options.learn(raw, (options, key))
            if ids_raw not in self.prompts.known:
                self.prompts.learn(ids_raw, request.prompt_token_ids)
        return request, key

    def _prompt(self, raw: bytes) -> Any:
        """Prompt ids (a list or None) decoded as the full decode types them,
        and remembered; `_UNSEEN` when they are bad: the full decode then gives its error."""
        try:
            ids = _decode_ids(raw)
        except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
            return _UNSEEN
        self.prompts.learn(raw, ids)
        return ids


class ChunkDecoder:
    """Decodes chunk bodies; one instance serves a process's threads."""

    def __init__(self) -> None:
        self._chat = _Fields(DerenderChatStreamRequest, _ChatRaw, "chat_request")
        self._completion = _Fields(DerenderCompletionStreamRequest, _CompletionRaw, "completion_request")

    def chat(self, body: bytes) -> ChatChunk:
        return self._chat.decode(body)

    def completion(self, body: bytes) -> CompletionChunk:
        return self._completion.decode(body)
