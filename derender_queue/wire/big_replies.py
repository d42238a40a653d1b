"""Reading large bulk replies (a heavy job's body, its result) without hiredis.

hiredis assembles a bulk reply by appending each 64 KiB socket read to a
buffer that it grows by 1 MiB at a time, then copies it out: for a
multi-megabyte GET, more CPU than reading the reply off the stream. So a reply whose first read starts `$<n>`
with n from BIG_BULK_BYTES up is read off the stream as it arrives and
joined once; every other reply goes through hiredis as before, at the cost
of one byte compare.
"""

from __future__ import annotations

import asyncio
from typing import Any

import hiredis
from redis._parsers import _AsyncHiredisParser
from redis._parsers.hiredis import NOT_ENOUGH_DATA
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse

BIG_BULK_BYTES = 1 << 18
"""From here up a bulk reply skips hiredis (smaller ones fit a few reads)."""
_HEADER_MAX = 24
"""`$` and up to 20 digits and CRLF: where a bulk header's end must be."""
_CLOSED = "Connection closed by server."
"""redis-py's words (SERVER_CLOSED_CONNECTION_ERROR)."""


class BigReplyParser(_AsyncHiredisParser):
    """redis-py's hiredis parser with a direct path for big bulk replies."""

    __slots__ = ("_decodes",)

    def on_connect(self, connection: Any) -> None:
        super().on_connect(connection)  # type: ignore[no-untyped-call]  # redis-py 5 leaves it unannotated
        self._decodes = bool(connection.encoder.decode_responses)

    async def read_response(self, disable_decoding: bool = False) -> Any:
        """redis-py 5.3's loop (`_AsyncHiredisParser.read_response`), inlined
        so that a small reply costs what it did, with one branch: a read that
        opens a big bulk reply on an empty reader takes the direct path."""
        reader: hiredis.Reader | None = self._reader
        stream: asyncio.StreamReader | None = self._stream
        if not self._connected or reader is None or stream is None:
            raise RedisConnectionError(_CLOSED)
        response = reader.gets(False) if disable_decoding else reader.gets()
        while response is NOT_ENOUGH_DATA:
            chunk = await stream.read(self._read_size)
            if not chunk:
                raise RedisConnectionError(_CLOSED)
            if chunk[:1] == b"$" and not self._decodes and not reader.has_data():
                start, size = _big_bulk(chunk)
                if size >= 0:
                    return await self._big(stream, chunk, start, size)
            reader.feed(chunk)
            response = reader.gets(False) if disable_decoding else reader.gets()
        if isinstance(response, RedisConnectionError):
            raise response
        if isinstance(response, list) and response and isinstance(response[0], RedisConnectionError):
            raise response[0]
        return response

    async def _big(self, stream: asyncio.StreamReader, chunk: bytes, start: int, size: int) -> bytes:
        try:
            parts = await _rest(stream, [memoryview(chunk)[start:]], size + 2 - (len(chunk) - start))
        except BaseException:
            # Part of a reply was taken off the stream: nothing more can be read
            # on this connection until it reconnects (hiredis would have kept it).
            self._connected = False
            raise
        return b"".join(parts)


async def _rest(stream: asyncio.StreamReader, parts: list[memoryview], remaining: int) -> list[memoryview]:
    """`parts` and the next `remaining` bytes, less the CRLF that ends them.
    Read as it arrives and joined once by the caller: `readexactly` would grow
    one buffer to the whole size, copying it over and over."""
    while remaining > 0:
        part = await stream.read(remaining)
        if not part:
            raise RedisConnectionError(_CLOSED)
        parts.append(memoryview(part))
        remaining -= len(part)
    tail = b"".join(bytes(p[-2:]) for p in parts[-2:])[-2:]
    if tail != b"\r\n":
        raise InvalidResponse("bulk reply not terminated by CRLF")
    cut = 2
    while cut:
        last = parts.pop()
        keep = max(len(last) - cut, 0)
        cut -= len(last) - keep
        if keep:
            parts.append(last[:keep])
    return parts


def _big_bulk(chunk: bytes) -> tuple[int, int]:
    """(where the payload starts, its size) when `chunk` opens a bulk reply of
    BIG_BULK_BYTES or more that runs past it; else (0, -1)."""
    if chunk[:1] != b"$":
        return 0, -1
    cut = chunk.find(b"\r\n", 1, _HEADER_MAX)
    if cut < 0 or not chunk[1:cut].isdigit():
        return 0, -1
    size, start = int(chunk[1:cut]), cut + 2
    if size < BIG_BULK_BYTES or len(chunk) - start > size:
        return 0, -1
    return start, size
