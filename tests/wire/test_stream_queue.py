"""Streaming through the queue: derender_queue.wire.streaming (Python producers)
and the SSE route (api/sse.py), against an in-process worker on fakeredis,
folded and compared with the non-streaming derender of the same tokens."""

from __future__ import annotations

import asyncio
import contextlib
import json

import fakeredis
import msgspec
import pytest

from api.sse import chunk_prefix
from derender_queue.core import Derenderer, ModelRegistry
from derender_queue.core.derenderer import is_stream_first
from derender_queue.errors import DerenderError
from derender_queue.models_config import BUILTIN
from derender_queue.settings import Settings
from derender_queue.wire.client import DerenderClient
from derender_queue.wire.sse_lines import SseLines
from derender_queue.wire.streaming import derender_stream, parse_sse
from tests.helpers.stream_support import expected_chat, fold_chat, generate_chunks, whole

TEXT = "Streaming 東京 🚀 derender STOP never"


@pytest.fixture(scope="module")
def registry() -> ModelRegistry:
    return ModelRegistry(BUILTIN)


def _case(registry) -> tuple[dict, dict, list[dict]]:
    ids = [*registry.get(None).vocab.tokenizer.encode(TEXT, add_special_tokens=False).ids, 1]
    choice = {"index": 0, "token_ids": ids, "finish_reason": "stop",
              "logprobs": {"content": [{"token_id": t, "logprob": -0.25, "top_logprobs": []} for t in ids]}}
    base = {"chat_request": {"stop": ["STOP"], "logprobs": True}, "prompt_tokens": 4}
    chunks = generate_chunks(choice, [1, 2, 3, 5, 8], usage={"prompt_tokens": 4, "completion_tokens": len(ids)})
    return base, choice, chunks


@contextlib.asynccontextmanager
async def queue_stack(registry, prefix: str):
    """An in-process worker and API state sharing one fakeredis server."""
    from api.app import create_app
    from api.server import state_factory
    from worker.main import serve

    server = fakeredis.FakeServer()
    settings = Settings(key_prefix=prefix, metrics_port=0, poll_delay_s=0.05)
    stop = asyncio.Event()
    worker = asyncio.create_task(serve(settings, registry, fakeredis.FakeAsyncRedis(server=server), stop=stop))
    app = create_app(state_factory(settings, fakeredis.FakeAsyncRedis(server=server),
                                   fakeredis.FakeAsyncRedis(server=server)))
    app.state.api = await state_factory(settings, fakeredis.FakeAsyncRedis(server=server),
                                        fakeredis.FakeAsyncRedis(server=server))()
    await app.state.api.waiter.start()
    try:
        yield app, server
    finally:
        await app.state.api.waiter.close()
        stop.set()
        await worker


async def _sse_lines(chunks: list[dict]):
    for gen in chunks:
        yield f"data: {json.dumps(gen)}\n"
        yield "\n"
    yield "data: [DONE]\n"


def test_parse_sse_splits_events() -> None:
    assert parse_sse('data: {"a": 1}\n\n: comment\nid: 7\nevent: message\ndata: [DONE]\n') == [{"a": 1}, None]
    assert parse_sse(b'data:{"b":2}') == [{"b": 2}]
    assert parse_sse({"c": 3}) == [{"c": 3}]


def test_parse_sse_reads_as_the_sse_route_does() -> None:
    """Before: any line but `data:` was skipped, so a chunk in an event of
    another name, or a stray line, vanished silently; now the helper reads
    by the route's rule (wire/sse_lines.py) and says which line."""
    with pytest.raises(DerenderError, match="line 1: unknown event `delta`"):
        parse_sse('event: delta\ndata: {"a": 1}\n')
    with pytest.raises(DerenderError, match="line 2 is neither an SSE line"):
        parse_sse('data: {"a": 1}\nchoices: []\n')
    with pytest.raises(DerenderError, match="shared fields in the stream"):
        parse_sse('event: request\ndata: {"model": "m"}\n')
    lines = SseLines()  # an event opened in one item holds for the next
    assert parse_sse("event: message\n", lines) == [] and parse_sse('data: {"a": 1}\n', lines) == [{"a": 1}]


async def test_python_producer_streams_through_the_queue(registry, prefix) -> None:
    base, choice, chunks = _case(registry)
    async with queue_stack(registry, prefix) as (_, server):
        redis = fakeredis.FakeAsyncRedis(server=server)
        async with DerenderClient(redis=redis, key_prefix=prefix) as client:
            out = [c async for c in derender_stream(client, "chat", _sse_lines(chunks), request=base)]
        leftovers = [k for k in await redis.keys(f"{prefix}:*") if b":job:" in k or b":result:" in k]
    assert leftovers == []  # nothing of the stream stays in Redis
    responses = [{"chunk": c} for c in out]
    expected = whole(Derenderer(registry), "chat", base, choice)
    assert fold_chat(responses) == expected_chat(expected)
    assert out[-1]["choices"] == [] and out[-1]["usage"]["completion_tokens"] == len(choice["token_ids"])


async def asgi_post(app, target: str, parts: list[bytes],
                    content_type: bytes = b"text/event-stream") -> tuple[int, dict, bytes]:
    """POST `parts` as a streamed body to `target` (path and query) straight into
    the ASGI app; returns status, headers, body."""
    path, _, query = target.partition("?")
    incoming = [{"type": "http.request", "body": p, "more_body": True} for p in parts]
    incoming.append({"type": "http.request", "body": b"", "more_body": False})
    sent: list[dict] = []

    async def receive():
        if incoming:
            return incoming.pop(0)
        await asyncio.sleep(3600)

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": query.encode(), "root_path": "", "headers": [(b"content-type", content_type)],
             "server": ("t", 80), "client": ("t", 1), "app": app}
    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), body


async def test_sse_route_streams_through_the_queue(registry, prefix) -> None:
    base, choice, chunks = _case(registry)
    text = json.dumps(base) + "\n" + "".join(f"data: {json.dumps(g)}\n\n" for g in chunks) + "data: [DONE]\n\n"
    raw = text.encode()
    parts = [raw[i : i + 37] for i in range(0, len(raw), 37)]  # lines split anywhere
    async with queue_stack(registry, prefix) as (app, _):
        status, headers, body = await asgi_post(app, "/v1/chat/completions/derender/sse", parts)
        bad_status, _, bad = await asgi_post(app, "/v1/chat/completions/derender/sse",
                                              [json.dumps(base).encode() + b"\ndata: {\"choices\": 5}\n"])
    assert status == 200 and headers[b"content-type"].startswith(b"text/event-stream")
    events = [e[len("data: "):] for e in body.decode().split("\n\n") if e]
    assert events[-1] == "[DONE]"
    responses = [{"chunk": json.loads(e)} for e in events[:-1]]
    assert len(responses) == len(chunks)
    assert fold_chat(responses) == expected_chat(whole(Derenderer(registry), "chat", base, choice))
    # A first chunk that cannot be read is refused before the stream starts.
    assert bad_status == 400 and json.loads(bad)["error"]["param"] == "generate_chunk"


class _InProcess:
    """A DerenderClient stand-in that derenders in this process."""

    def __init__(self, derenderer: Derenderer) -> None:
        self.derenderer = derenderer

    async def derender(self, endpoint, body, model=None, timeout=30.0) -> dict:
        return json.loads(self.derenderer.derender(endpoint, body, model).body)


class _Recording(_InProcess):
    def __init__(self, derenderer: Derenderer) -> None:
        super().__init__(derenderer)
        self.bodies: list[bytes] = []

    async def derender(self, endpoint, body, model=None, timeout=30.0) -> dict:
        self.bodies.append(body)
        return await super().derender(endpoint, body, model, timeout)


async def test_our_producers_write_the_stream_flag_first(registry) -> None:
    """A worker decodes such a chunk as one at once; with the flag elsewhere it
    first tries, and fails, the non-streaming decode."""
    base, _, chunks = _case(registry)
    client = _Recording(Derenderer(registry))
    assert [c async for c in derender_stream(client, "chat", _sse_lines(chunks), request=base)]
    assert client.bodies and all(is_stream_first(b) for b in client.bodies)
    prefix = chunk_prefix({"model": "m", **{k: msgspec.Raw(json.dumps(v).encode()) for k, v in base.items()}})
    assert is_stream_first(prefix + json.dumps(chunks[0]).encode() + b"}")


async def test_python_producer_keeps_one_state_per_choice(registry) -> None:
    """n=2: the generate stage interleaves the choices' chunks."""
    derenderer = Derenderer(registry)
    tok = registry.get(None).vocab.tokenizer
    choices = [{"index": i, "token_ids": tok.encode(t, add_special_tokens=False).ids, "finish_reason": "length"}
               for i, t in enumerate(["First 東京 answer.", "Second 🚀 one, longer."])]
    streams = [generate_chunks(c, list(range(len(c["token_ids"])))) for c in choices]
    interleaved = [chunk for pair in zip(*streams, strict=False) for chunk in pair] + streams[1][len(streams[0]):]

    async def source():
        for chunk in interleaved:
            yield chunk

    out = [c async for c in derender_stream(_InProcess(derenderer), "chat", source(), request={"chat_request": {}})]
    for i, choice in enumerate(choices):
        mine = [{"chunk": {**c, "choices": [x for x in c["choices"] if x["index"] == i]}} for c in out]
        mine = [m for m in mine if m["chunk"]["choices"]]
        assert fold_chat(mine) == expected_chat(whole(derenderer, "chat", {"chat_request": {}}, choice))
