"""Streaming through real worker processes: chunks land on different workers
(they share the signing key kept in Redis), the fold equals the
non-streaming derender, and no per-request key is left in Redis."""

from __future__ import annotations

import asyncio

import redis

from derender_queue.wire.client import DerenderClient
from derender_queue.wire.streaming import derender_stream
from tests.helpers.stack import Stack, metric

TEXT_IDS = [19923, 14, 2058, 3, 671, 4787, 13769, 46012, 54994, 1060, 270, 41638, 6397, 16, 31083, 14] * 3


def generate_chunks(ids: list[int], size: int):
    for i in range(0, len(ids), size):
        last = i + size >= len(ids)
        yield {"request_id": "s1", "choices": [{"index": 0, "token_ids": ids[i:i + size],
                                                "finish_reason": "length" if last else None}]}


async def _agen(items):
    for item in items:
        yield item


def test_stream_across_two_workers_equals_whole(redis_server, prefix, registry):
    s = Stack(redis_server.url, prefix, workers=2).start()
    try:
        async def main():
            async with DerenderClient(redis_server.url, key_prefix=prefix) as client:
                chunks = [c async for c in derender_stream(client, "chat", _agen(generate_chunks(TEXT_IDS, 3)))]
                whole = await client.derender_chat({"generate_response": {"request_id": "s1", "choices": [
                    {"index": 0, "token_ids": TEXT_IDS, "finish_reason": "length"}]}})
            return chunks, whole

        chunks, whole = asyncio.run(main())
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
        assert text == whole["choices"][0]["message"]["content"]
        assert chunks[-1]["choices"][0]["finish_reason"] == "length"
        per_worker = [metric(f"http://127.0.0.1:{p}/metrics", "derender_worker_jobs_total") for p in s.metrics_ports]
        assert all(n > 0 for n in per_worker), per_worker  # both workers took chunks
        r = redis.Redis.from_url(redis_server.url)
        left = sorted(k.decode() for k in r.scan_iter(f"{prefix}:*"))
        # Workers' own bookkeeping stays (an activity key once a second that saw jobs ended), and the lanes'.
        allowed = (f"{prefix}:stream-secret", f"{prefix}:workers", f"{prefix}:worker:", f"{prefix}:activity:",
                   f"{prefix}:health:", f"{prefix}:{{s0}}:claims", f"{prefix}:{{s0}}:batched:")
        assert all(k.startswith(allowed) for k in left), left
    finally:
        s.close()
