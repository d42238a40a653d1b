"""The derender entry point: request bytes in, response bytes out.

This is all a worker thread runs per job; it holds no per-request state, so
one instance serves every thread. A `"stream": true` body on either endpoint
is one chunk of a streaming derender (stream.py), and a `step` job carries
many streams' chunks (step.py); their state is signed with
`stream_secret`, which every worker serving a stream must share (None: a
random per-process secret, enough for one process such as the CLI).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from derender_queue.contract.requests import DerenderChatRequest, DerenderCompletionRequest
from derender_queue.contract.types import Endpoint, JobKind
from derender_queue.errors import DerenderError

from .body import decode_body
from .chat import derender_chat
from .completion import derender_completion
from .models import ModelRegistry
from .step import WHOLE_STEP, Rendered, derender_step
from .stream import StreamDerenderer

_encoder = msgspec.json.Encoder()
_STREAM_TRUE = re.compile(rb'"stream"\s*:\s*true')
_STREAM_FIRST = re.compile(rb'\s*\{\s*"stream"\s*:\s*true\s*[,}]')
_STREAM_PREFIXES = (b'{"stream":true,', b'{"stream": true,')  # compact and json.dumps spellings


class Derenderer:
    def __init__(self, registry: ModelRegistry, stream_secret: bytes | None = None) -> None:
        self.registry = registry
        self.stream = StreamDerenderer(stream_secret)

    def derender(self, endpoint: JobKind, body: bytes, model: str | None = None,
                 share: tuple[int, int] = WHOLE_STEP) -> Rendered:
        """Derender one body; `model` overrides the body's model name; a step
        may be derendered a share at a time (step.py `join_shares`).

        Raises DerenderError (vLLM-shaped, with its HTTP status) on bad input.
        """
        if endpoint == "step":
            return derender_step(self.stream, self.registry, body, model, share)
        if share != WHOLE_STEP:
            raise ValueError("only a step job can be derendered in shares")
        if is_stream_first(body):  # how our producers write a chunk
            return self._chunk(endpoint, body, model)
        try:
            request: DerenderChatRequest | DerenderCompletionRequest = (
                decode_body(body, DerenderChatRequest) if endpoint == "chat"
                else decode_body(body, DerenderCompletionRequest)
            )
        except DerenderError:
            # Every streaming body fails the non-streaming types (`stream`
            # must be false there), so only failures pay for this check.
            if not _is_stream(body):
                raise
            return self._chunk(endpoint, body, model)
        name = model or request.model
        loaded = self.registry.get(name)
        response = (
            derender_chat(request, loaded, name or loaded.name) if isinstance(request, DerenderChatRequest)
            else derender_completion(request, loaded, name or loaded.name)
        )
        return Rendered(_encoder.encode(response), loaded.name, response.usage.completion_tokens)

    def _chunk(self, endpoint: Endpoint, body: bytes, model: str | None) -> Rendered:
        stream = self.stream
        if endpoint == "chat":
            chat, options_key = stream.chunks.chat(body)
            loaded = self.registry.get(model or chat.model)
            rendered = stream.chat(chat, loaded, model or chat.model or loaded.name, options_key)
        else:
            completion, options_key = stream.chunks.completion(body)
            loaded = self.registry.get(model or completion.model)
            rendered = stream.completion(completion, loaded, model or completion.model or loaded.name, options_key)
        return Rendered(rendered.body, loaded.name, rendered.completion_tokens)


def is_stream_first(body: bytes) -> bool:
    """Is `"stream": true` the body's first field? Such a chunk is decoded as
    one at once; any other body tries the non-streaming decode first, which
    a chunk fails, before `_is_stream` sends it on. The literal prefixes are
    checked before the regex, which costs more than they do."""
    return body.startswith(_STREAM_PREFIXES) or _STREAM_FIRST.match(body) is not None


class _StreamFlag(msgspec.Struct):
    stream: Any = False


_flag = msgspec.json.Decoder(_StreamFlag)


def _is_stream(body: bytes) -> bool:
    """Does the body ask for streaming (`"stream": true` at the top)?"""
    try:
        return _flag.decode(body).stream is True
    except (msgspec.ValidationError, RecursionError):
        return False
    except msgspec.DecodeError:  # e.g. -Infinity, which the decoders take in a second pass
        return _STREAM_TRUE.search(body) is not None
