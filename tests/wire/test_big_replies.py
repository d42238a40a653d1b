"""wire/big_replies.py against a real redis-server: a big bulk reply read
past hiredis must be the same value, and every other reply, before or after
one on the same connection, must read as before."""

from __future__ import annotations

import asyncio
import os

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse, ResponseError

from derender_queue.wire.big_replies import BIG_BULK_BYTES, BigReplyParser, _big_bulk, _rest
from derender_queue.wire.connection import async_client, copy_pool

SIZES = [0, 1, BIG_BULK_BYTES - 1, BIG_BULK_BYTES, BIG_BULK_BYTES + 1, 3 * 2**20 + 7]


def _value(size: int) -> bytes:
    """Random bytes with CRLFs and `$` headers inside, as a body can hold."""
    return (b"$9\r\n" + os.urandom(size))[:size]


async def test_values_of_every_size_read_back_whole(redis_server, prefix):
    client = async_client(redis_server.url)
    try:
        assert client.connection_pool.connection_kwargs["parser_class"] is BigReplyParser
        for size in SIZES:
            value = _value(size)
            await client.set(f"{prefix}:v", value)
            assert await client.get(f"{prefix}:v") == value
            assert await client.get(f"{prefix}:missing") is None
    finally:
        await client.aclose()


async def test_replies_around_a_big_one_on_one_connection_stay_in_step(redis_server, prefix):
    client = Redis.from_url(redis_server.url, parser_class=BigReplyParser, max_connections=1)
    big = _value(2 * BIG_BULK_BYTES)
    try:
        await client.set(f"{prefix}:big", big)
        async with client.pipeline(transaction=False) as pipe:
            pipe.get(f"{prefix}:big").incr(f"{prefix}:n").get(f"{prefix}:big").lrange(f"{prefix}:l", 0, -1)
            pipe.rpush(f"{prefix}:l", big, b"x").lrange(f"{prefix}:l", 0, -1)
            got = await pipe.execute()
        assert got == [big, 1, big, [], 2, [big, b"x"]]
        assert await client.blmove(f"{prefix}:l", f"{prefix}:m", 1, "LEFT", "RIGHT") == big
        with pytest.raises(ResponseError):
            await client.incr(f"{prefix}:big")
        assert await client.get(f"{prefix}:big") == big
        assert await client.ping()
    finally:
        await client.aclose()


async def test_a_decoding_client_keeps_redis_py_s_reading(redis_server, prefix):
    client = Redis.from_url(redis_server.url, parser_class=BigReplyParser, decode_responses=True)
    text = "é" * BIG_BULK_BYTES
    try:
        await client.set(f"{prefix}:t", text)
        assert await client.get(f"{prefix}:t") == text
    finally:
        await client.aclose()


async def test_copied_pools_read_big_replies_too(redis_server, prefix):
    plain = Redis.from_url(redis_server.url)  # as arq makes its pool: redis-py's default parser
    copy = Redis.from_pool(copy_pool(plain.connection_pool))
    try:
        assert copy.connection_pool.connection_kwargs["parser_class"] is BigReplyParser
        value = _value(BIG_BULK_BYTES + 5)
        await plain.set(f"{prefix}:c", value)
        assert await copy.get(f"{prefix}:c") == value
    finally:
        await copy.aclose()
        await plain.aclose()


@pytest.mark.parametrize(("chunk", "expected"), [
    (b"$262144\r\nab", (9, 262144)),
    (b"$262143\r\nab", (0, -1)),  # small: hiredis
    (b"$-1\r\n", (0, -1)),  # nil
    (b"*2\r\n$262144\r\n", (0, -1)),  # inside an array: hiredis
    (b"$2621", (0, -1)),  # header cut off: hiredis
    (b"$26x144\r\n", (0, -1)),
    (b"$4\r\nabcd\r\n", (0, -1)),
])
def test_only_a_big_bulk_reply_s_opening_takes_the_direct_path(chunk, expected):
    assert _big_bulk(chunk) == expected


async def test_a_connection_cut_inside_a_big_reply_is_a_connection_error_and_reconnects():
    """A server that closes half way through a big value: redis-py's
    ConnectionError (what every caller handles), and the next command works
    on a new connection."""
    calls = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal calls
        while await reader.read(65536):  # one small command per write
            calls += 1
            if calls == 1:
                writer.write(b"$%d\r\n" % (2 * BIG_BULK_BYTES) + b"x" * 1000)
                await writer.drain()
                writer.close()
                return
            writer.write(b"+PONG\r\n")
            await writer.drain()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    # No CLIENT SETINFO on connecting: this server answers GET and PING only.
    client = Redis.from_url(f"redis://127.0.0.1:{port}", parser_class=BigReplyParser, max_connections=1,
                            lib_name=None, lib_version=None)
    try:
        with pytest.raises(RedisConnectionError):
            await client.get("k")
        assert await client.ping()
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("cut", [0, 1, 2, 3, 500, 998, 999, 1000, 1001])
async def test_the_crlf_is_dropped_wherever_the_reads_split_it(cut):
    """`_rest` gets the value in as many pieces as the socket gave: the
    terminating CRLF may straddle two of them, or be a piece alone."""
    payload = _value(1000)
    stream = asyncio.StreamReader()
    wire = payload + b"\r\n"
    stream.feed_data(wire[:cut])
    reading = asyncio.ensure_future(_rest(stream, [memoryview(b"")], len(wire)))
    while cut and not reading.done() and len(stream._buffer):  # type: ignore[attr-defined]  # until it took the first piece
        await asyncio.sleep(0)
    stream.feed_data(wire[cut:])
    assert b"".join(await reading) == payload


async def test_a_bulk_reply_without_its_crlf_is_refused():
    stream = asyncio.StreamReader()
    stream.feed_data(b"abcdXY")
    with pytest.raises(InvalidResponse):
        await _rest(stream, [memoryview(b"")], 6)


async def test_an_error_redis_py_reads_as_a_connection_error_is_still_raised_as_one():
    """The inlined loop keeps redis-py's rule: an error reply it maps to
    ConnectionError (a full server) is raised, not returned."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(65536):
            writer.write(b"-ERR max number of clients reached\r\n")
            await writer.drain()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = Redis.from_url(f"redis://127.0.0.1:{port}", parser_class=BigReplyParser, lib_name=None,
                            lib_version=None)
    try:
        with pytest.raises(RedisConnectionError, match="max number of clients"):
            await client.get("k")
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
