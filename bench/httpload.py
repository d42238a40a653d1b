"""A lean HTTP/1.1 keep-alive load generator on raw asyncio streams.

Cheap enough per request that on a 2-core machine it measures the server,
not itself (its own CPU time is reported beside every result).
"""

from __future__ import annotations

import asyncio
import contextlib
import time

LIMIT = 1 << 25
"""StreamReader's buffer limit: with the default (64 KiB) it stops reading
at 128 KiB buffered, so a 6 MB answer took ~50 pause/resume turns of the
loop; this lets it arrive in one."""


class ClosedByServer(ConnectionResetError):
    """The server closed the connection without a byte of answer: a keep-alive
    connection it timed out while we were idle. Nothing was served, so the
    request may be sent again on a new connection."""


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        return cls(*await asyncio.open_connection(host, port, limit=LIMIT))

    async def request(self, method: str, path: str, body: bytes = b"",
                      headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (f"{method} {path} HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\n{extra}\r\n").encode()
        try:
            self.writer.write(head)
            self.writer.write(body)  # not `head + body`: a copy of a body of megabytes
            status_line = await self.reader.readline()
        except (ConnectionResetError, BrokenPipeError) as exc:  # our bytes met its close
            raise ClosedByServer(f"{method} {path}: connection closed before any answer") from exc
        if not status_line:  # its FIN came first
            raise ClosedByServer(f"{method} {path}: connection closed before any answer")
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return int(status_line.split()[1]), await self.reader.readexactly(length)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()


async def sequential(host: str, port: int, path: str, body: bytes, n: int) -> list[float]:
    """Latencies (ms) of `n` back-to-back requests on one connection."""
    conn = await Connection.open(host, port)
    out = []
    try:
        for _ in range(n):
            t = time.perf_counter()
            status, _ = await conn.request("POST", path, body)
            out.append((time.perf_counter() - t) * 1000)
            assert status == 200, status
    finally:
        await conn.close()
    return out


async def closed_loop(host: str, port: int, path: str, body: bytes, connections: int, seconds: float) -> dict:
    """`connections` clients each looping requests for `seconds`."""
    latencies: list[float] = []
    errors = 0
    stop_at = time.perf_counter() + seconds
    cpu0 = time.process_time()

    async def client() -> None:
        nonlocal errors
        conn = await Connection.open(host, port)
        try:
            while time.perf_counter() < stop_at:
                t = time.perf_counter()
                status, _ = await conn.request("POST", path, body)
                latencies.append((time.perf_counter() - t) * 1000)
                errors += status != 200
        finally:
            await conn.close()

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(connections)))
    elapsed = time.perf_counter() - start
    latencies.sort()
    return {
        "requests": len(latencies), "errors": errors, "rps": len(latencies) / elapsed,
        "p50_ms": latencies[len(latencies) // 2], "p99_ms": latencies[int(len(latencies) * 0.99)],
        "generator_cpu": (time.process_time() - cpu0) / elapsed,
    }
