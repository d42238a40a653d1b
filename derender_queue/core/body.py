"""Request bytes -> typed contract objects, every failure a vLLM-shaped 400.

msgspec decodes strict JSON straight into the contract's Structs. A Python
generate stage may write `-Infinity` (its JSON allows it), so a body that fails
strict decoding and contains such a constant is read once more with the
stdlib, `-Infinity` replaced by -9999.0 (what the response reports for it, as
vLLM's coupled endpoints do), and re-encoded as strict JSON; `NaN` and
`Infinity` are refused. vLLM's derender instead fails the whole request once
a -inf reaches its response serializer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TypeVar, cast

import msgspec

from derender_queue.contract.requests import (
    DerenderChatRequest,
    DerenderCompletionRequest,
    GenerateLogProb,
    GenerateResponse,
)
from derender_queue.contract.stream_requests import (
    DerenderChatStreamRequest,
    DerenderCompletionStreamRequest,
    GenerateStreamChunk,
)
from derender_queue.errors import DerenderError, bad_request

T = TypeVar(
    "T", DerenderChatRequest, DerenderCompletionRequest, DerenderChatStreamRequest, DerenderCompletionStreamRequest
)
_PLACEHOLDER = re.compile(r"token_id:(\d+)")
_AT = re.compile(r" - at `\$\.?([^`]*)`$")
_DECODERS = {
    kind: msgspec.json.Decoder(kind)
    for kind in (
        DerenderChatRequest, DerenderCompletionRequest,
        DerenderChatStreamRequest, DerenderCompletionStreamRequest,  # streaming (stream.py)
    )
}


def decode_body(body: bytes, kind: type[T]) -> T:
    """Decode and normalise a derender body of the given request type."""
    try:
        request = cast(T, _DECODERS[kind].decode(body))  # the decoder for `kind` returns a `kind`
    except msgspec.ValidationError as exc:
        raise invalid(exc) from None
    except msgspec.DecodeError as exc:
        request = _decode_with_constants(body, kind, exc)
    except RecursionError:
        raise bad_request("Invalid request: JSON is nested too deeply") from None
    return normalise(request)


def normalise(request: T) -> T:
    """What decoding leaves to do: logprob ids in their pre-0.33 spelling."""
    for response in _generated(request):
        _normalise_logprob_ids(response)
    return request


def _generated(
    request: DerenderChatRequest | DerenderCompletionRequest
    | DerenderChatStreamRequest | DerenderCompletionStreamRequest,
) -> Sequence[GenerateResponse | GenerateStreamChunk]:
    """The generate stage's parts of a body (one chunk for a streaming one)."""
    if isinstance(request, DerenderCompletionRequest):
        return request.generate_responses
    if isinstance(request, DerenderChatRequest):
        return [request.generate_response]
    return [request.generate_chunk]


def _decode_with_constants(body: bytes, kind: type[T], error: Exception) -> T:
    if b"Infinity" not in body and b"NaN" not in body:
        raise bad_request(f"Invalid JSON body: {error}") from None
    try:
        strict = msgspec.json.encode(json.loads(body, parse_constant=_constant))
        return cast(T, _DECODERS[kind].decode(strict))  # the decoder for `kind` returns a `kind`
    except msgspec.ValidationError as exc:
        raise invalid(exc) from None
    except (ValueError, RecursionError) as exc:
        # json.JSONDecodeError and msgspec.ValidationError are ValueErrors.
        raise bad_request(f"Invalid request: {exc}") from None


def invalid(exc: msgspec.ValidationError, what: str = "Invalid request") -> DerenderError:
    """msgspec names the offending field (`... - at `$.a.b[0]``): make it `param`."""
    match = _AT.search(str(exc))
    return bad_request(f"{what}: {exc}", param=match.group(1) if match else None)


def _constant(name: str) -> float:
    if name == "-Infinity":
        return -9999.0
    raise ValueError(f"{name} is not a valid number here (only -Infinity is accepted)")


def _normalise_logprob_ids(response: GenerateResponse | GenerateStreamChunk) -> None:
    """Accept the pre-0.33 `token: "token_id:N"` spelling by filling `token_id`."""
    for choice in response.choices:
        content = choice.logprobs.content if choice.logprobs else None
        if not content or content[0].token_id is not None:
            continue
        for position, entry in enumerate(content):
            _fill_id(entry, choice.index, position)
            for candidate in entry.top_logprobs or ():
                _fill_id(candidate, choice.index, position)


def _fill_id(entry: GenerateLogProb, choice: int, position: int) -> None:
    if entry.token_id is not None:
        return
    match = _PLACEHOLDER.fullmatch(entry.token or "")
    if match is None:
        raise bad_request(
            f"logprobs entry {position} of choice {choice} has no token_id "
            f"(nor a 'token_id:N' token: {entry.token!r})",
            param="logprobs",
        )
    entry.token_id = int(match.group(1))
