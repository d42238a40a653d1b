"""One load-generator process of `bench/probe.py --tails`, on httpx.

    python bench/httpx_load.py URL BODY_FILE (--clients 4 | --every 0.05) --start-at T --stop-at T

A realistic client (httpx's async client, keep-alive, one connection per
client) in a process of its own, so that parsing a heavy response in one
generator never delays the clock of a probe in another. `--clients N`: N
clients loop the request back to back; `--every S`: one client sends it every
S seconds (a late request is sent at once, the schedule is not shifted).
Prints one JSON object: each request's start (epoch s), latency (ms) and
status, and the process's CPU seconds. A GET when BODY_FILE is `-`.

`sequential` and `closed_loop` are bench/httpload.py's, on httpx: `python
bench/queue.py --alternate N --http-client httpload,httpx` drives the same
stacks with both, in turns.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

import httpx


async def _client(http: httpx.AsyncClient, url: str, body: bytes | None, stop_at: float,
                  every: float | None, out: list[tuple[float, float, int]]) -> None:
    next_at = time.time()
    while time.time() < stop_at:
        started, t = time.time(), time.perf_counter()
        if body is None:
            response = await http.get(url)
        else:
            response = await http.post(url, content=body, headers={"content-type": "application/json"})
        out.append((started, (time.perf_counter() - t) * 1000, response.status_code))
        if every is not None:
            next_at += every
            await asyncio.sleep(max(next_at - time.time(), 0))


async def run(url: str, body: bytes | None, clients: int, every: float | None,
              start_at: float, stop_at: float) -> list[tuple[float, float, int]]:
    out: list[tuple[float, float, int]] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=30) as http:
        await http.get(url.split("/v1/", 1)[0] + "/health")  # connect before the clock starts
        await asyncio.sleep(max(start_at - time.time(), 0))
        await asyncio.gather(*(_client(http, url, body, stop_at, every, out) for _ in range(clients)))
    return out


async def sequential(host: str, port: int, path: str, body: bytes, n: int) -> list[float]:
    """Latencies (ms) of `n` back-to-back requests on one connection (httpload.sequential)."""
    out = []
    async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=30) as http:
        for _ in range(n):
            t = time.perf_counter()
            response = await http.post(path, content=body, headers={"content-type": "application/json"})
            out.append((time.perf_counter() - t) * 1000)
            assert response.status_code == 200, response.status_code
    return out


async def closed_loop(host: str, port: int, path: str, body: bytes, connections: int, seconds: float) -> dict:
    """`connections` clients each looping requests for `seconds` (httpload.closed_loop)."""
    latencies: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(base_url=f"http://{host}:{port}", limits=limits, timeout=30) as http:
        stop_at = time.perf_counter() + seconds
        cpu0 = time.process_time()

        async def client() -> None:
            nonlocal errors
            while time.perf_counter() < stop_at:
                t = time.perf_counter()
                response = await http.post(path, content=body, headers={"content-type": "application/json"})
                latencies.append((time.perf_counter() - t) * 1000)
                errors += response.status_code != 200

        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(connections)))
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu0
    latencies.sort()
    return {
        "requests": len(latencies), "errors": errors, "rps": len(latencies) / elapsed,
        "p50_ms": latencies[len(latencies) // 2], "p99_ms": latencies[int(len(latencies) * 0.99)],
        "generator_cpu": cpu / elapsed,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url")
    ap.add_argument("body_file")
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--every", type=float, default=None)
    ap.add_argument("--start-at", type=float, required=True)
    ap.add_argument("--stop-at", type=float, required=True)
    args = ap.parse_args()
    body = None if args.body_file == "-" else Path(args.body_file).read_bytes()
    cpu0 = time.process_time()
    samples = asyncio.run(run(args.url, body, args.clients, args.every, args.start_at, args.stop_at))
    print(json.dumps({"samples": samples, "cpu_s": time.process_time() - cpu0}))


if __name__ == "__main__":
    main()
