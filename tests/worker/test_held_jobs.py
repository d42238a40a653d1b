"""A worker's CPU pool with a held-text store (worker/cpu_pool.py, wire/held_text.py).

Engine steps carrying several held streams at once: each step's items that
read stored text are fetched in one round trip and the step runs again, the
writes land before the answer, and the folded streams equal the same streams
derendered without a store. The heavy children's frames carry the fetched
text and the writes (`framed`, called as a child calls it).
"""

from __future__ import annotations

import asyncio
import functools
import json

import fakeredis
import msgspec

from derender_queue.wire.held_text import HeldTextStore
from derender_queue.wire.keys import Keys
from tests.helpers.stream_support import PARSER_CONFIGS, derenderers_for, fold_chat, run_stream
from worker.cpu_pool import CpuPool, compute
from worker.heavy_children import framed

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
BASE = {"prompt_token_ids": [1, 2, 3], "chat_request": {"tools": TOOLS}}


def _streams(der, n: int) -> list[list[dict]]:
    tok = der.registry.get(None).vocab.tokenizer
    out = []
    for k in range(n):
        text = (f"Stream {k} thinks about 東京 🚀, at length. " * (30 + 10 * k) + "</think>\n\nSunny."
                '<tool_call>\n{"name": "get_weather", "arguments": {"city": "東京"}}\n</tool_call>')
        ids = tok.encode(text, add_special_tokens=False).ids
        chunks = [{"request_id": f"r{k}", "choices": [{"index": 0, "token_ids": ids[i:i + 4]}]}
                  for i in range(0, len(ids), 4)]
        chunks[-1]["choices"][0]["finish_reason"] = "stop"
        out.append(chunks)
    return out


def _step(items: list[bytes]) -> bytes:
    return b'{"endpoint":"chat","items":[' + b",".join(items) + b"]}"


def test_steps_of_held_streams_through_a_pool_with_a_store():
    der = derenderers_for({"r1_hermes": PARSER_CONFIGS["r1_hermes"]})["r1_hermes"]
    streams = _streams(der, 3)
    redis = fakeredis.FakeAsyncRedis()
    pool = CpuPool(der, 0)
    pool.held = HeldTextStore(redis, Keys("t"), 600_000)
    states: list[dict | None] = [None] * len(streams)
    answers: list[list[dict]] = [[] for _ in streams]
    fetches = 0
    fetch = pool.held.fetch

    async def counted(keys):
        nonlocal fetches
        fetches += 1
        return await fetch(keys)

    pool.held.fetch = counted  # type: ignore[method-assign]

    async def run() -> int:
        most = 0
        for step in range(max(len(s) for s in streams)):
            live = [k for k, s in enumerate(streams) if step < len(s)]
            items = [json.dumps({**BASE, "stream": True, "generate_chunk": streams[k][step]}
                                | ({"stream_state": states[k]} if states[k] else {})).encode() for k in live]
            status, out, _, _, _ = await pool.run("step", _step(items), None, light=True)
            assert status == 200, out
            for k, result in zip(live, json.loads(out)["results"], strict=True):
                assert "chunk" in result, result
                answers[k].append(result)
                states[k] = result["stream_state"]
                most = max(most, len(states[k]["opaque"]))
            held = [key async for key in redis.scan_iter("t:held:*")]
            assert len(held) <= len(streams)
        return most

    try:
        most = asyncio.run(run())
    finally:
        pool.shutdown()
    assert most < 1200, "the states stayed small"
    assert 1 <= fetches <= len(streams), "each decision fetched once, a step's needs together"
    for chunks, got in zip(streams, answers, strict=True):
        assert fold_chat(got) == fold_chat(run_stream(der, "chat", {**BASE}, chunks))


def test_a_childs_frames_carry_the_fetched_text_and_the_writes():
    der = derenderers_for({"r1_hermes": PARSER_CONFIGS["r1_hermes"]})["r1_hermes"]
    chunks = _streams(der, 1)[0]
    work = framed(functools.partial(compute, der))
    state, store = None, {}
    for gen in chunks:
        body = json.dumps({**BASE, "stream": True, "generate_chunk": gen}
                          | ({"stream_state": state} if state else {})).encode()
        texts: dict = {}
        while True:
            head, out = work(bytearray(msgspec.msgpack.encode(("chat", None, (0, 1), texts))), bytearray(body))
            status, _, _, held = msgspec.msgpack.decode(head)
            if held and held[0]:  # needs: fetch and call again, as the pool does
                texts = {key: bytes(store[key]) for key in held[0]}
                continue
            break
        assert status == 200
        for key, offset, data in (held[1] if held else []):
            store.setdefault(key, bytearray())[offset:offset + len(data)] = data
        state = json.loads(out)["stream_state"]
    assert store, "text went through the frames to the store"
