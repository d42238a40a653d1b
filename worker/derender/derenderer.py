"""The derender entry point: request bytes in, response bytes out.

This is all a worker thread runs per job; it holds no per-request state, so
one instance serves every thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import msgspec

from derender_queue.contract import DerenderChatRequest, DerenderCompletionRequest

from .body import decode_body
from .chat import derender_chat
from .completion import derender_completion
from .models import ModelRegistry

Endpoint = Literal["chat", "completion"]
_encoder = msgspec.json.Encoder()


@dataclass(frozen=True)
class Rendered:
    body: bytes
    model: str
    completion_tokens: int


class Derenderer:
    def __init__(self, registry: ModelRegistry) -> None:
        self.registry = registry

    def derender(self, endpoint: Endpoint, body: bytes, model: str | None = None) -> Rendered:
        """Derender one body; `model` overrides the body's model name.

        Raises DerenderError (vLLM-shaped, with its HTTP status) on bad input.
        """
        if endpoint == "chat":
            chat = decode_body(body, DerenderChatRequest)
            name = model or chat.model
            loaded = self.registry.get(name)
            response = derender_chat(chat, loaded, name or loaded.name)
        else:
            completion = decode_body(body, DerenderCompletionRequest)
            name = model or completion.model
            loaded = self.registry.get(name)
            response = derender_completion(completion, loaded, name or loaded.name)
        return Rendered(_encoder.encode(response), loaded.name, response.usage.completion_tokens)
