"""SSE streaming derender for HTTP producers: a stream of generate chunks in,
a `text/event-stream` of derendered chunks out.

    POST /v1/chat/completions/derender/sse   (and /v1/completions/derender/sse)

The request body is lines: first a JSON object with the fields sent with
every chunk (`model`, `chat_request`/`completion_request`,
`prompt_token_ids`, `prompt_tokens`; `{}` for none), then one generate
chunk per SSE `data:` line or NDJSON line; `data: [DONE]` or the end of the
body ends it. Each chunk becomes one derender job; the answer is one
`data: {chunk}` event per chunk, `data: {"error": ...}` (vLLM's error shape,
then the stream ends) on a failed one, and `data: [DONE]`.

The API stays thin: it splits events and splices the signed `stream_state`
from one job's answer into the next job's body as bytes; the only thing it
reads in a chunk is `choices[].index` (one state per choice, as vLLM's
protocol keeps them), by a typed scan that skips the token data. The
response is written while the body is still being read, so a producer can
stream both ways; a client that sends the whole body first works too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from derender_queue.contract import Endpoint, error_body
from derender_queue.errors import DerenderError, bad_request

from .state import ApiState, api_state
from .submit import submit_for_reply
from .trace import request_trace

_STATE_SEP = b',"stream_state":'  # the worker's answer ends with the state
_CHUNK_HEAD = b'{"chunk":'
_DONE = b"[DONE]"


class _Index(msgspec.Struct):
    index: int = 0


class _Choices(msgspec.Struct):
    choices: list[_Index] = []


_choices = msgspec.json.Decoder(_Choices)


async def chat(request: Request) -> Response:
    return await _open(request, "chat")


async def completion(request: Request) -> Response:
    return await _open(request, "completion")


async def _open(request: Request, endpoint: Endpoint) -> Response:
    """Read the header line (errors here are plain HTTP errors), then stream."""
    state = api_state(request)
    events = _events(request.stream(), state.settings.max_body_bytes)
    first = await anext(events, None)
    try:
        header = msgspec.json.decode(first or b"")
    except msgspec.DecodeError as exc:
        raise bad_request(f"the first line must be a JSON object of request fields: {exc}") from None
    if not isinstance(header, dict):
        raise bad_request("the first line must be a JSON object of request fields")
    model = state.resolve_model(header.get("model"))
    fields = {k: v for k, v in header.items() if k not in ("stream", "generate_chunk", "stream_state")}
    prefix = msgspec.json.encode({**fields, "stream": True})[:-1] + b',"generate_chunk":'
    return _EventStream(_derender_all(state, endpoint, model, prefix, events, request_trace(request)))


async def _derender_all(state: ApiState, endpoint: Endpoint, model: str, prefix: bytes, events: AsyncIterator[bytes],
                        trace: dict[str, str]) -> AsyncIterator[bytes]:
    states: dict[int, bytes] = {}
    last: bytes | None = None
    async for payload in events:
        try:
            index = _index(payload)
            carried = states.get(index) if index is not None else last
            body = prefix + payload + (_STATE_SEP + carried if carried else b"") + b"}"
            status, out = await _job(state, endpoint, model, body, trace)
        except DerenderError as exc:
            status, out = exc.status, exc.body()
        if status != 200:
            yield b"data: " + out + b"\n\n"
            return
        head, _, tail = out.rpartition(_STATE_SEP)
        if index is not None:
            states[index] = last = tail[:-1]
        yield b"data: " + head[len(_CHUNK_HEAD):] + b"\n\n"
    yield b"data: " + _DONE + b"\n\n"


def _index(payload: bytes) -> int | None:
    """The chunk's choice index (None: no choice, e.g. a usage chunk)."""
    try:
        choices = _choices.decode(payload).choices
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise bad_request(f"Invalid generate chunk: {exc}", param="generate_chunk") from None
    return choices[0].index if choices else None


async def _job(state: ApiState, endpoint: Endpoint, model: str, body: bytes,
               trace: dict[str, str]) -> tuple[int, bytes]:
    """Enqueue one chunk and wait for its answer (a 504 error on timeout)."""
    await state.admission.admit(model)
    timeout = state.settings.request_timeout_s
    job_id = await submit_for_reply(state, endpoint, body, model, trace)
    result = await state.waiter.wait(state.queue, job_id, timeout)
    if result is None:
        return 504, error_body(504, f"derender did not finish within {timeout:g} s (job {job_id})")
    envelope, out = result
    return envelope.status, out


async def _events(stream: AsyncIterator[bytes], limit: int) -> AsyncIterator[bytes]:
    """Event payloads: SSE `data:` lines or bare NDJSON lines; blank lines,
    comments and other SSE fields are skipped; `[DONE]` ends the stream."""
    buffer = b""
    async for part in stream:
        buffer += part
        *lines, buffer = buffer.split(b"\n")
        if len(buffer) > limit:
            raise DerenderError(f"a line of the request body exceeds {limit} bytes", status=413)
        for line in lines:
            payload = _payload(line)
            if payload == _DONE:
                return
            if payload:
                yield payload
    payload = _payload(buffer)
    if payload and payload != _DONE:
        yield payload


def _payload(line: bytes) -> bytes:
    line = line.strip()
    if line.startswith(b"data:"):
        return line[5:].strip()
    return line if line.startswith(b"{") else b""


class _EventStream(Response):
    """Writes events as they come, reading the request body meanwhile
    (Starlette's StreamingResponse would consume the body's messages while
    listening for a disconnect)."""

    def __init__(self, events: AsyncIterator[bytes]) -> None:
        self.status_code = 200
        self.background = None
        self.raw_headers = [(b"content-type", b"text/event-stream; charset=utf-8"),
                            (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
        self.events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        try:
            async for event in self.events:
                await send({"type": "http.response.body", "body": event, "more_body": True})
        except ClientDisconnect:
            return
        except DerenderError as exc:  # e.g. an oversized line
            await send({"type": "http.response.body", "body": b"data: " + exc.body() + b"\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
