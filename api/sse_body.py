"""The SSE route's request body: its lines as they arrive, and which are the
shared fields (`model`, `chat_request`/`completion_request`,
`prompt_token_ids`, `prompt_tokens`) and which generate chunks, by the rule
of derender_queue/wire/sse_lines.py (docs/streaming.md); the end of the body
ends the stream as `data: [DONE]` does. Errors before the first chunk are
plain HTTP errors; later ones end the stream with an error event (api/sse.py).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator

import msgspec
from starlette.requests import ClientDisconnect
from starlette.types import Message, Receive

from derender_queue.contract.stream_requests import DerenderChatStreamRequest, DerenderCompletionStreamRequest
from derender_queue.errors import DerenderError, bad_request
from derender_queue.wire.sse_lines import SseItem, SseLines

from .inflight import StreamBytes
from .intake import idle_body

PER_CHUNK = frozenset({"stream", "generate_chunk", "stream_state"})
SHARED_FIELDS = (frozenset(DerenderChatStreamRequest.__struct_fields__)
                 | frozenset(DerenderCompletionStreamRequest.__struct_fields__)) - PER_CHUNK


class _Index(msgspec.Struct):
    index: int = 0


class _Choices(msgspec.Struct):
    choices: list[_Index] = []


_choices = msgspec.json.Decoder(_Choices)
_fields = msgspec.json.Decoder(dict[str, msgspec.Raw])
_model = msgspec.json.Decoder(str | None)


class BodyLines:
    """The request body's lines as they arrive, read from the ASGI channel
    itself: the route keeps reading while its response streams. Each piece
    is taken from the bytes-in-flight budget (`held`) before it is kept."""

    def __init__(self, receive: Receive, limit: int, idle_s: float, held: StreamBytes) -> None:
        self.receive = receive
        self.limit = limit
        self.idle_s = idle_s
        """A body that sends nothing for this long is a 408 (DERENDER_BODY_IDLE_TIMEOUT_S)."""
        self.held = held
        self.handed = 0
        """Body bytes of the lines handed out so far, line endings included."""
        self._partial: list[bytes] = []
        """The line being received, in the pieces it came in (joined once, when it ends)."""
        self._partial_size = 0
        self._lines: deque[tuple[bytes, int]] = deque()
        """Complete lines, each with its size in the body."""
        self._ended = False

    async def next(self) -> bytes | None:
        """The next line without its line ending; None at the end of the body."""
        while not self._lines:
            if self._ended:
                return None
            message = await self._receive()
            if message["type"] == "http.disconnect":
                raise ClientDisconnect()
            piece = message.get("body", b"")
            if piece:
                await self.held.take(len(piece))
            self._add(piece)
            if not message.get("more_body", False):
                self._ended = True
                self._lines.append((b"".join(self._partial), self._partial_size))
        line, size = self._lines.popleft()
        self.handed += size
        return line.rstrip(b"\r")

    async def _receive(self) -> Message:
        """The next message; a 408 once the client has sent nothing for
        `idle_s` while none of its chunks was being answered (a client may
        wait for a chunk's answer before it sends the next)."""
        start = time.monotonic()
        while True:
            busy = self.held.queued > self.held.freed
            quiet = time.monotonic() - max(start, self.held.freed_at)
            left = self.idle_s if busy else self.idle_s - quiet
            if left <= 0:
                raise idle_body(self.idle_s)
            try:
                return await asyncio.wait_for(self.receive(), left)
            except TimeoutError:
                continue

    def _add(self, piece: bytes) -> None:
        first = piece.find(b"\n")
        if first < 0:
            self._partial.append(piece)
            self._partial_size += len(piece)
        else:
            line = b"".join([*self._partial, piece[:first]])
            self._lines.append((line, len(line) + 1))
            *more, rest = piece[first + 1:].split(b"\n")
            self._lines.extend((line, len(line) + 1) for line in more)
            self._partial, self._partial_size = [rest], len(rest)
        if self._partial_size > self.limit:
            raise DerenderError(f"a line of the request body exceeds {self.limit} bytes", status=413)


class SseBody:
    """The shared fields, then the generate chunks, of one SSE request body."""

    def __init__(self, lines: BodyLines) -> None:
        self.lines = lines
        self._sse = SseLines()  # reads every line `lines` hands out, so its number names the line
        self._done = False

    async def fields(self) -> tuple[dict[str, msgspec.Raw], bytes | None]:
        """The shared fields ({} when none came) and the first chunk, checked
        (None: the body held no chunk)."""
        fields: dict[str, msgspec.Raw] = {}
        while (item := await self._item()) is not None:
            if item.kind == "chunk":
                chunk_index(item.payload)
                return fields, item.payload
            fields = shared_fields(item.payload, self._sse.number)
        return fields, None

    async def chunks(self) -> AsyncIterator[bytes]:
        """The chunks after the first (DerenderError for a line that is not one)."""
        while (item := await self._item()) is not None:
            if item.kind == "fields":
                raise bad_request(f"line {self._sse.number}: the shared fields (`event: request`) must come "
                                  "before the first chunk")
            yield item.payload

    async def _item(self) -> SseItem | None:
        """The shared fields or a chunk; None at the end."""
        while not self._done and (line := await self.lines.next()) is not None:
            item = self._sse.read(line)
            if item is not None:
                self._done = item.kind == "done"
                return None if self._done else item
        return None


def shared_fields(payload: bytes, line: int) -> dict[str, msgspec.Raw]:
    """The shared fields, as raw JSON per field; only names a streaming
    request has besides the per-chunk ones."""
    try:
        fields = _fields.decode(payload)
    except RecursionError:
        raise bad_request(f"line {line}: the shared fields are nested too deeply") from None
    except msgspec.ValidationError:
        raise bad_request(f"line {line}: the shared fields must be a JSON object") from None
    except msgspec.DecodeError as exc:
        raise bad_request(f"line {line}: the shared fields are not valid JSON: {exc}") from None
    unknown = sorted(set(fields) - SHARED_FIELDS - {"stream"})
    if unknown:
        raise bad_request(
            f"line {line}: {', '.join(f'`{k}`' for k in unknown)} is not a shared field "
            f"({', '.join(sorted(SHARED_FIELDS))}); generate chunks go in `data:` lines")
    return fields


def requested_model(fields: dict[str, msgspec.Raw]) -> str | None:
    raw = fields.get("model")
    if raw is None:
        return None
    try:
        name: str | None = _model.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise bad_request("`model` must be a string", param="model") from None
    return name


def chunk_index(payload: bytes) -> int | None:
    """The chunk's choice index (None: no choice, e.g. a usage chunk), by a
    typed scan that skips the token data."""
    try:
        choices = _choices.decode(payload).choices
    except RecursionError:
        raise bad_request("Invalid generate chunk: nested too deeply", param="generate_chunk") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise bad_request(f"Invalid generate chunk: {exc}", param="generate_chunk") from None
    return choices[0].index if choices else None
