"""SSE streaming derender for HTTP producers: a stream of generate chunks in,
a `text/event-stream` of derendered chunks out.

    POST /v1/chat/completions/derender/sse   (and /v1/completions/derender/sse)

The body is the generate stage's SSE stream, optionally led by an
`event: request` event with the fields sent with every chunk (api/sse_body.py
has the framing). Each chunk becomes one derender job; the answer is one
`data: {chunk}` event per chunk, `data: {"error": ...}` (vLLM's error shape,
then the stream ends) on a failed one, and `data: [DONE]`. What cannot be
parsed before the first chunk is a plain 400.

The API stays thin: it splices the signed `stream_state` from one job's
answer into the next job's body as bytes; the only thing it reads in a chunk
is `choices[].index` (one state per choice, as vLLM's protocol keeps them).
The response is written while the body is still being read, so a producer
can stream both ways. A Redis failure mid-stream ends it with a 503 error
event; a client that leaves has its queued chunk job withdrawn.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import msgspec
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from derender_queue.contract.error_shape import error_body
from derender_queue.contract.types import Endpoint
from derender_queue.errors import DerenderError
from derender_queue.wire.failures import redis_failure

from .inflight import StreamBytes, ledger
from .instrument import caller_scope, unavailable_body
from .sse_body import BodyLines, SseBody, chunk_index, requested_model
from .state import ApiState, api_state
from .submit import disconnected, submit_for_reply, wait_for_reply
from .trace import request_trace

_STATE_SEP = b',"stream_state":'  # the worker's answer ends with the state
_CHUNK_HEAD = b'{"chunk":'
_DONE_EVENT = b"data: [DONE]\n\n"
_READ_AHEAD = 32
"""Chunks read ahead of the one being derendered (the body is read meanwhile),
at most: their bytes count in the bytes-in-flight budget (api/inflight.py
`StreamBytes`), and reading ahead waits where it has no room."""
Chunk = tuple[bytes, int]
"""A generate chunk and the body offset its line ends at (its bytes and those
before it are given back to the budget once it is answered)."""


async def derender_sse(request: Request, endpoint: Endpoint) -> Response:
    """Read up to the first chunk (errors here are plain HTTP errors), then stream."""
    state = api_state(request)
    held = StreamBytes(ledger(request), caller_scope(request))
    lines = BodyLines(request.receive, state.settings.max_body_bytes, state.settings.body_idle_timeout_s, held)
    body = SseBody(lines)
    fields, first = await body.fields()
    model = state.resolve_model(requested_model(fields))
    prefix = chunk_prefix(fields)
    if first is not None:
        held.queued = lines.handed
    stream = _Stream(state, endpoint, model, prefix, request_trace(request), caller_scope(request), held)
    return _EventStream(stream, body, None if first is None else (first, lines.handed))


def chunk_prefix(fields: dict[str, msgspec.Raw]) -> bytes:
    """Every chunk job's body up to its generate chunk: the stream flag
    first (a worker then decodes the body as a chunk at once), then the
    request's shared fields."""
    shared = {k: v for k, v in fields.items() if k != "stream"}
    return msgspec.json.encode({"stream": True, **shared})[:-1] + b',"generate_chunk":'


class _Stream:
    """One request's chunks through the queue, in order."""

    def __init__(self, state: ApiState, endpoint: Endpoint, model: str, prefix: bytes,
                 trace: dict[str, str], owner: str, held: StreamBytes) -> None:
        self.state, self.endpoint, self.model, self.prefix, self.trace = state, endpoint, model, prefix, trace
        self.owner = owner
        """Whose chunk jobs these are (api/owner.py)."""
        self.held = held
        self.gone = asyncio.Event()
        """Set when the client disconnected."""

    async def events(self, first: Chunk | None, chunks: asyncio.Queue[Chunk | DerenderError | None]
                     ) -> AsyncIterator[bytes]:
        states: dict[int, bytes] = {}
        last: bytes | None = None
        item = first
        while item is not None:
            payload, end = item
            try:
                index = chunk_index(payload)
                carried = states.get(index) if index is not None else last
                body = self.prefix + payload + (_STATE_SEP + carried if carried else b"") + b"}"
                answer = await self._job(body)
                if answer is None:  # the client left
                    return
                status, out = answer
            except DerenderError as exc:
                status, out = exc.status, exc.body()
            except Exception as exc:  # the headers went out: say so in the stream
                if not redis_failure(exc):
                    raise
                status, out = 503, unavailable_body(exc)
            self.held.free_to(end)
            if status != 200:
                yield b"data: " + out + b"\n\n"
                return
            head, _, tail = out.rpartition(_STATE_SEP)
            if index is not None:
                states[index] = last = tail[:-1]
            yield b"data: " + head[len(_CHUNK_HEAD):] + b"\n\n"
            got = await chunks.get()
            if isinstance(got, DerenderError):  # a line that is no chunk: in order, after the ones before
                yield b"data: " + got.body() + b"\n\n"
                return
            item = got
        yield _DONE_EVENT

    async def _job(self, body: bytes) -> tuple[int, bytes] | None:
        """Enqueue one chunk and wait for its answer (a 504 error on timeout);
        None, with the job withdrawn, when the client leaves first."""
        if self.gone.is_set():
            return None
        state = self.state
        await state.admission.admit(self.model)
        job_id = await submit_for_reply(state, self.endpoint, body, self.model, self.trace, self.owner)
        result = await wait_for_reply(state, job_id, self.model, self.gone.wait())
        if result is not None:
            envelope, out = result
            return envelope.status, bytes(out)  # small: one chunk
        if self.gone.is_set():
            return None
        timeout = state.settings.request_timeout_s
        return 504, error_body(504, f"derender did not finish within {timeout:g} s (job {job_id})")


class _EventStream(Response):
    """Writes events as they come while a task reads the rest of the body and
    then watches for the client leaving (Starlette's StreamingResponse would
    consume the body's messages itself)."""

    def __init__(self, stream: _Stream, body: SseBody, first: Chunk | None) -> None:
        self.status_code = 200
        self.background = None
        self.raw_headers = [(b"content-type", b"text/event-stream; charset=utf-8"),
                            (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
        self.stream, self.source, self.first = stream, body, first

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        chunks: asyncio.Queue[Chunk | DerenderError | None] = asyncio.Queue(_READ_AHEAD)
        reader = asyncio.create_task(self._read(chunks))
        try:
            async for event in self.stream.events(self.first, chunks):
                await send({"type": "http.response.body", "body": event, "more_body": True})
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _read(self, chunks: asyncio.Queue[Chunk | DerenderError | None]) -> None:
        try:
            async for chunk in self.source.chunks():
                self.stream.held.queued = end = self.source.lines.handed
                await chunks.put((chunk, end))
            await chunks.put(None)
            await disconnected(self.source.lines.receive)
        except DerenderError as exc:
            await chunks.put(exc)
            await disconnected(self.source.lines.receive)
        except ClientDisconnect:
            pass
        self.stream.gone.set()
        with contextlib.suppress(asyncio.QueueFull):  # a full queue: the next job sees `gone`
            chunks.put_nowait(None)
