"""bench/httpload.py's Connection against a server that closes an idle
keep-alive connection (what uvicorn does after its keep-alive timeout, and
what a fault that pauses the failover test's clients for seconds provokes)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

from httpload import ClosedByServer, Connection


async def _closing_server(closed: asyncio.Event) -> asyncio.base_events.Server:
    async def close_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()
        await writer.wait_closed()
        closed.set()

    return await asyncio.start_server(close_at_once, "127.0.0.1", 0)


def test_a_connection_the_server_closed_says_so_instead_of_failing_to_parse():
    async def go() -> None:
        closed = asyncio.Event()
        server = await _closing_server(closed)
        port = server.sockets[0].getsockname()[1]
        conn = await Connection.open("127.0.0.1", port)
        await closed.wait()  # the request goes out after the server's close, as after a keep-alive timeout
        try:
            with pytest.raises(ClosedByServer):
                await conn.request("GET", "/health")
        finally:
            await conn.close()
            server.close()
            await server.wait_closed()

    asyncio.run(go())


def test_closed_by_server_is_a_connection_error():
    assert issubclass(ClosedByServer, ConnectionResetError)
