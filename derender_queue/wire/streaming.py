"""Streaming derender for Python producers: a generate stage's SSE chunks in,
OpenAI stream chunks out, one derender job per chunk.

    async with DerenderClient(url) as client:
        async for chunk in derender_stream(client, "chat", generate_sse_lines,
                                           request={"chat_request": {...}, "prompt_token_ids": ids}):
            send(chunk)                     # a chat.completion.chunk dict

Chunks may be dicts or raw SSE text (`data: {...}` lines, whole events, bytes;
`data: [DONE]` ends the stream), read by the SSE route's rule
(wire/sse_lines.py): a line that is no SSE is an error, never skipped. Each
call carries the `stream_state` the previous one returned for that choice
index (vLLM's protocol: one state per choice), so any worker can take any
chunk and nothing is kept in Redis between chunks. Errors raise `DerenderError` as `DerenderClient` does.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any, Protocol

import msgspec

from derender_queue.contract.types import Endpoint
from derender_queue.errors import bad_request

from .sse_lines import SseLines


class Derenders(Protocol):
    """What the helper needs: `DerenderClient.derender`."""

    async def derender(self, endpoint: Endpoint, body: bytes | dict[str, Any], model: str | None = None,
                       timeout: float = 30.0) -> dict[str, Any]: ...


async def derender_stream(
    client: Derenders, endpoint: Endpoint, chunks: AsyncIterable[dict[str, Any] | str | bytes], *,
    request: dict[str, Any] | None = None, model: str | None = None, timeout: float = 30.0,
) -> AsyncIterator[dict[str, Any]]:
    """Derender each generate chunk in order; `request` holds the fields sent
    with every chunk (`chat_request`/`completion_request`, `prompt_token_ids`,
    `prompt_tokens`, `model`)."""
    # The flag first: a worker then decodes each body as a chunk at once.
    base = {"stream": True} | {k: v for k, v in (request or {}).items() if k != "stream"}
    states: dict[int, dict[str, Any]] = {}
    last: dict[str, Any] | None = None
    lines = SseLines()  # an event may span items
    async for item in chunks:
        for gen in parse_sse(item, lines):
            if gen is None:
                return
            choices = gen.get("choices") or []
            state = states.get(choices[0].get("index", 0)) if choices else last
            body = {**base, "generate_chunk": gen}
            if state is not None:
                body["stream_state"] = state
            out = await client.derender(endpoint, msgspec.json.encode(body), model, timeout)
            if choices:
                states[choices[0].get("index", 0)] = last = out["stream_state"]
            yield out["chunk"]


def parse_sse(item: dict[str, Any] | str | bytes, lines: SseLines | None = None) -> list[dict[str, Any] | None]:
    """The generate chunks in one item (None for `[DONE]`); `lines` carries
    the reading from item to item. The shared fields go in `derender_stream`'s
    `request`, not in the stream."""
    if isinstance(item, dict):
        return [item]
    lines = lines or SseLines()
    data = item.encode("utf-8") if isinstance(item, str) else bytes(item)
    out: list[dict[str, Any] | None] = []
    for line in data.splitlines():
        read = lines.read(line)
        if read is None:
            continue
        if read.kind == "fields":
            raise bad_request(f"line {lines.number}: shared fields in the stream: pass them as `request`")
        out.append(None if read.kind == "done" else msgspec.json.decode(read.payload))
    return out
