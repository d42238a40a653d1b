"""Engine-step jobs (contract/step_requests.py): many streams' next chunks in one job.

Every item's result must be exactly what the per-chunk job answers for the
same body (but `created`, the clock), for random chunkings of several streams
interleaved step by step, each stream's state passing from step to step; a bad
item fails alone; a bad envelope fails the step. In process, through an
in-process worker and the HTTP route on fakeredis, and through real worker
processes on a real Redis (slow tier)."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import random

import fakeredis
import pytest

from derender_queue.contract.step_requests import STEP_MAX_ITEMS
from derender_queue.core import Derenderer, ModelRegistry, join_shares
from derender_queue.core.step import share_range
from derender_queue.errors import DerenderError
from derender_queue.models_config import BUILTIN
from derender_queue.wire.client import DerenderClient
from derender_queue.wire.queue import LIGHT_BODY_BYTES
from tests.helpers.stack import Stack, post
from tests.helpers.stream_support import (
    expected_chat,
    expected_completion,
    fold_chat,
    fold_completion,
    whole,
    without_clock,
)
from tests.wire.test_stream_queue import asgi_post, queue_stack

TEXTS = ["Streaming 東京 🚀 derender STOP never", "Hello, world! A longer one, with ünïcode.", "a b c d e f g",
         "Tokens 🎉🎉 and more text here."]


@pytest.fixture(scope="module")
def registry() -> ModelRegistry:
    return ModelRegistry(BUILTIN)


class _Stream:
    """One request's chunk bodies, cut at random places, and its carried state."""

    def __init__(self, rng: random.Random, registry: ModelRegistry, endpoint: str, n: int) -> None:
        ids = [*registry.get(None).vocab.tokenizer.encode(TEXTS[n % len(TEXTS)], add_special_tokens=False).ids, 1]
        logprobs = rng.random() < 0.5
        self.choice: dict = {"index": 0, "token_ids": ids, "finish_reason": "stop"}
        if logprobs:
            self.choice["logprobs"] = {"content": [
                {"token_id": t, "logprob": -0.5, "top_logprobs": [{"token_id": t, "logprob": -0.5}]} for t in ids]}
        options: dict = {"stop": ["STOP"]} if rng.random() < 0.5 else {}
        if logprobs:
            options |= {"logprobs": True, "top_logprobs": 1} if endpoint == "chat" else {"logprobs": 1}
        self.base = {f"{endpoint}_request": options} | ({"prompt_tokens": 3} if endpoint == "chat" else {})
        cuts = sorted(rng.sample(range(1, len(ids)), rng.randint(0, len(ids) - 1)))
        bounds = [0, *cuts, len(ids)]
        content = (self.choice.get("logprobs") or {}).get("content")
        self.chunks = []
        for start, end in itertools.pairwise(bounds):
            part: dict = {"index": 0, "token_ids": ids[start:end]}
            if content is not None:
                part["logprobs"] = {"content": content[start:end]}
            self.chunks.append({"request_id": f"req-{n}", "choices": [part]})
        self.chunks[-1]["choices"][0]["finish_reason"] = "stop"
        self.state: dict | None = None
        self.out: list[dict] = []

    def next_body(self) -> bytes:
        body = {**self.base, "stream": True, "generate_chunk": self.chunks[len(self.out)]}
        if self.state is not None:
            body["stream_state"] = self.state
        return json.dumps(body).encode()

    def take(self, result: dict) -> None:
        self.out.append(result)
        self.state = result["stream_state"]

    @property
    def done(self) -> bool:
        return len(self.out) == len(self.chunks)


def _step_body(endpoint: str, items: list[bytes], model: str | None = None) -> bytes:
    head = {"endpoint": endpoint} | ({"model": model} if model else {})
    return json.dumps(head).encode()[:-1] + b',"items":[' + b",".join(items) + b"]}"


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("endpoint", ["chat", "completion"])
def test_each_item_equals_its_per_chunk_job(registry, endpoint, seed) -> None:
    rng = random.Random(seed)
    derenderer = Derenderer(registry)
    streams = [_Stream(rng, registry, endpoint, n) for n in range(rng.randint(2, 6))]
    steps = 0
    while not all(s.done for s in streams):
        running = [s for s in streams if not s.done and rng.random() < 0.8] or [s for s in streams if not s.done]
        bodies = [s.next_body() for s in running]
        results = json.loads(derenderer.derender("step", _step_body(endpoint, bodies)).body)["results"]
        assert len(results) == len(running)
        for stream, body, result in zip(running, bodies, results, strict=True):
            alone = json.loads(derenderer.derender(endpoint, body).body)
            assert without_clock(result) == without_clock(alone)
            stream.take(result)
        steps += 1
    assert steps >= max(len(s.chunks) for s in streams)
    fold, expect = (fold_chat, expected_chat) if endpoint == "chat" else (fold_completion, expected_completion)
    for stream in streams:  # and the streams still fold to their whole derender
        assert fold(stream.out) == expect(whole(derenderer, endpoint, stream.base, stream.choice,
                                                request_id=stream.chunks[0]["request_id"]))


def _good_items(derenderer: Derenderer) -> tuple[list[bytes], dict]:
    """Three first chunks, and one stream's state after its first chunk."""
    first = {"stream": True, "generate_chunk": {"request_id": "s0", "choices": [{"index": 0, "token_ids": [19923]}]}}
    state = json.loads(derenderer.derender("chat", json.dumps(first).encode()).body)["stream_state"]
    items = [json.dumps({"stream": True, "generate_chunk": {"request_id": f"s{i}", "choices": [
        {"index": 0, "token_ids": [19923, 14]}]}}).encode() for i in range(3)]
    return items, state


def _forged(state: dict) -> dict:
    raw = bytearray(base64.urlsafe_b64decode(state["opaque"] + "=" * (-len(state["opaque"]) % 4)))
    raw[-1] ^= 1
    return {"opaque": base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()}


def _bad_items(state: dict) -> dict[str, tuple[bytes, int, str | None]]:
    """Bad items, the status each must get and its `param`."""
    chunk = {"request_id": "s0", "choices": [{"index": 0, "token_ids": [14]}]}
    return {
        "bad signature": (json.dumps({"stream": True, "generate_chunk": chunk, "stream_state": _forged(state)}
                                     ).encode(), 400, "stream_state"),
        "token id outside the vocabulary": (json.dumps({"stream": True, "generate_chunk": {
            "request_id": "x", "choices": [{"index": 0, "token_ids": [10**9]}]}}).encode(), 400,
            "choice 0 token_ids"),
        "field of the wrong type": (b'{"stream": true, "generate_chunk": {"choices": 5}}', 400,
                                    "generate_chunk.choices"),
        "not streaming": (b'{"generate_chunk": {"choices": []}}', 400, None),
        "not an object": (b"[1, 2]", 400, None),
        "another model": (json.dumps({"stream": True, "model": "other", "generate_chunk": chunk}).encode(), 400,
                          "model"),
        "another stream's state": (json.dumps({"stream": True, "generate_chunk": {**chunk, "request_id": "s1"},
                                               "stream_state": state}).encode(), 400, "stream_state"),
    }


def test_a_bad_item_fails_alone(registry) -> None:
    derenderer = Derenderer(registry)
    good, state = _good_items(derenderer)
    for name, (bad, status, param) in _bad_items(state).items():
        items = [good[0], bad, good[1], good[2]]
        results = json.loads(derenderer.derender("step", _step_body("chat", items)).body)["results"]
        assert [set(r) for r in results] == [{"chunk", "stream_state"}, {"error", "status"},
                                             {"chunk", "stream_state"}, {"chunk", "stream_state"}], name
        assert results[1]["status"] == status == results[1]["error"]["code"], name
        assert results[1]["error"]["param"] == param, (name, results[1])
        assert results[1]["error"]["type"] == "BadRequestError"
        if name not in ("another model", "not streaming"):  # the per-chunk job answers the same error
            with pytest.raises(DerenderError) as alone:
                derenderer.derender("chat", bad)
            assert json.loads(alone.value.body()) == {"error": results[1]["error"]}, name
        for item, result in zip([good[0], good[1], good[2]], [results[0], results[2], results[3]], strict=True):
            assert without_clock(result) == without_clock(json.loads(derenderer.derender("chat", item).body))


def test_an_item_carries_the_state_the_per_chunk_path_issued(registry) -> None:
    """States are the same in both directions: a stream may move between
    per-chunk jobs and steps."""
    derenderer = Derenderer(registry)
    _, state = _good_items(derenderer)
    item = json.dumps({"stream": True, "generate_chunk": {"request_id": "s0", "choices": [
        {"index": 0, "token_ids": [14], "finish_reason": "stop"}]}, "stream_state": state}).encode()
    [result] = json.loads(derenderer.derender("step", _step_body("chat", [item])).body)["results"]
    assert result["chunk"]["choices"][0]["delta"]["content"] == ","


def test_unknown_fields_in_an_item_are_ignored_as_in_its_per_chunk_job(registry) -> None:
    derenderer = Derenderer(registry)
    item = (b'{"stream": true, "extra": 1, "generate_chunk": {"request_id": "u", '
            b'"choices": [{"index": 0, "token_ids": [19923], "x": 2}]}}')
    [result] = json.loads(derenderer.derender("step", _step_body("chat", [item])).body)["results"]
    assert without_clock(result) == without_clock(json.loads(derenderer.derender("chat", item).body))


ENVELOPES = {
    "not JSON": (b'{"endpoint": "chat", "items": [', 400, None),
    "not an object": (b"[]", 400, None),
    "no items": (b'{"endpoint": "chat"}', 400, None),
    "items not a list": (b'{"endpoint": "chat", "items": {}}', 400, "items"),
    "unknown endpoint": (b'{"endpoint": "embed", "items": []}', 400, "endpoint"),
    "unknown field": (b'{"endpoint": "chat", "items": [], "item": []}', 400, None),
    "too many items": (b'{"endpoint": "chat", "items": [' + b",".join([b"{}"] * (STEP_MAX_ITEMS + 1)) + b"]}", 400,
                       "items"),
    "unknown model": (b'{"endpoint": "chat", "model": "nope", "items": []}', 404, "model"),
}


@pytest.mark.parametrize("case", ENVELOPES)
def test_a_bad_envelope_fails_the_step(registry, case) -> None:
    body, status, param = ENVELOPES[case]
    with pytest.raises(DerenderError) as failed:
        Derenderer(registry).derender("step", body)
    assert failed.value.status == status
    assert failed.value.param == param
    error = json.loads(failed.value.body())["error"]
    assert error["code"] == status and error["message"]


def test_an_empty_step_and_the_item_bound(registry) -> None:
    derenderer = Derenderer(registry)
    assert json.loads(derenderer.derender("step", b'{"endpoint": "chat", "items": []}').body) == {"results": []}
    full = _step_body("chat", [b"{}"] * STEP_MAX_ITEMS)
    results = json.loads(derenderer.derender("step", full).body)["results"]
    assert len(results) == STEP_MAX_ITEMS and all(r["status"] == 400 for r in results)


@pytest.mark.parametrize("seed", range(4))
def test_a_step_s_shares_join_to_the_whole_step_s_answer(registry, seed) -> None:
    """Any number of shares, good and bad items mixed, items more or fewer
    than shares: the shares' answers joined are the whole step's, item by item."""
    rng = random.Random(seed)
    derenderer = Derenderer(registry)
    good, state = _good_items(derenderer)
    pool = good + [bad for bad, _, _ in _bad_items(state).values()]
    for n in (0, 1, 2, 5, 17):
        body = _step_body("chat", [rng.choice(pool) for _ in range(n)])
        whole_step = json.loads(derenderer.derender("step", body).body)["results"]
        for count in (1, 2, 3, 4, 7):
            shares = [derenderer.derender("step", body, None, (i, count)).body for i in range(count)]
            joined = json.loads(join_shares(shares))["results"]
            assert [without_clock(r) for r in joined] == [without_clock(r) for r in whole_step], (n, count)


def test_shares_cover_every_item_once_in_order() -> None:
    for items in range(0, 40):
        for count in range(1, 9):
            ranges = [share_range(items, (i, count)) for i in range(count)]
            assert [i for start, stop in ranges for i in range(start, stop)] == list(range(items))
            assert max(stop - start for start, stop in ranges) - min(stop - start for start, stop in ranges) <= 1
    for bad in ((2, 2), (-1, 2), (0, 0)):
        with pytest.raises(ValueError):
            share_range(5, bad)


@pytest.mark.parametrize("case", ["not JSON", "unknown field", "unknown model"])
def test_a_bad_envelope_fails_every_share_as_it_fails_the_step(registry, case) -> None:
    body, status, param = ENVELOPES[case]
    for share in ((0, 2), (1, 2)):
        with pytest.raises(DerenderError) as failed:
            Derenderer(registry).derender("step", body, None, share)
        assert (failed.value.status, failed.value.param) == (status, param)


def test_only_a_step_has_shares(registry) -> None:
    good, _ = _good_items(Derenderer(registry))
    with pytest.raises(ValueError):
        Derenderer(registry).derender("chat", good[0], None, (0, 2))


# ------------------------------------------------ through the queue, in process


async def _post_json(app, target: str, body: bytes) -> tuple[int, bytes]:
    status, _, out = await asgi_post(app, target, [body], b"application/json")
    return status, out


async def test_steps_through_the_queue_client_and_route(registry, prefix) -> None:
    rng = random.Random(7)
    local = Derenderer(registry)
    streams = [_Stream(rng, registry, "chat", n) for n in range(4)]
    good, state = _good_items(local)
    bad, status, _ = _bad_items(state)["bad signature"]
    async with queue_stack(registry, prefix) as (app, server):
        redis = fakeredis.FakeAsyncRedis(server=server)
        async with DerenderClient(redis=redis, key_prefix=prefix) as client:
            via_route = True
            while not all(s.done for s in streams):
                running = [s for s in streams if not s.done]
                bodies = [s.next_body() for s in running]
                if via_route:
                    code, out = await _post_json(app, "/v1/derender/step", _step_body("chat", bodies, "deepseek-v4"))
                    assert code == 200
                    results = json.loads(out)["results"]
                else:
                    results = await client.derender_step("chat", bodies)
                for stream, body, result in zip(running, bodies, results, strict=True):
                    alone = await client.derender("chat", body)  # the per-chunk job, same worker secret
                    assert without_clock(result) == without_clock(alone)
                    stream.take(result)
                via_route = not via_route
            mixed = await client.derender_step("chat", [good[0], bad, json.loads(good[1])])
            with pytest.raises(DerenderError) as whole_step:
                await client.derender_step("chat", [b"{}"] * (STEP_MAX_ITEMS + 1))
            code, envelope_error = await _post_json(app, "/v1/derender/step", b'{"endpoint": "chat", "items": 3}')
    assert [r.get("status") for r in mixed] == [None, status, None]
    assert whole_step.value.status == 400 and whole_step.value.param == "items"
    assert code == 400 and json.loads(envelope_error)["error"]["param"] == "items"
    for stream in streams:
        assert fold_chat(stream.out) == expected_chat(whole(local, "chat", stream.base, stream.choice,
                                                            request_id=stream.chunks[0]["request_id"]))


# ------------------------------------------------ real workers on a real Redis


def test_steps_through_real_workers_and_the_http_route(redis_server, prefix, registry) -> None:
    """Two worker processes sharing the stream secret: consecutive steps of
    the same streams land on either, and results equal the per-chunk jobs'."""
    rng = random.Random(11)
    streams = [_Stream(rng, registry, "completion", n) for n in range(5)]
    good, state = _good_items(Derenderer(registry))
    s = Stack(redis_server.url, prefix, workers=2).start()
    try:
        async def main() -> list[dict]:
            async with DerenderClient(redis_server.url, key_prefix=prefix) as client:
                step = 0
                while not all(x.done for x in streams):
                    running = [x for x in streams if not x.done]
                    bodies = [x.next_body() for x in running]
                    if step % 2:
                        code, out, _ = await asyncio.to_thread(
                            post, s.url + "/v1/derender/step", _step_body("completion", bodies))
                        assert code == 200, out
                        results = json.loads(out)["results"]
                    else:
                        results = await client.derender_step("completion", bodies)
                    for x, body, result in zip(running, bodies, results, strict=True):
                        alone = await client.derender("completion", body)
                        assert without_clock(result) == without_clock(alone)
                        x.take(result)
                    step += 1
                forged = json.dumps({"stream": True, "generate_chunk": {"request_id": "s0", "choices": [
                    {"index": 0, "token_ids": [14]}]}, "stream_state": _forged(state)}).encode()
                # Past LIGHT_BODY_BYTES a step runs in a heavy child: the same answers.
                many = [json.dumps({"stream": True, "generate_chunk": {"request_id": f"h{i}", "choices": [
                    {"index": 0, "token_ids": [19923, 14, 2058]}]}}).encode() for i in range(300)]
                assert len(b",".join(many)) > LIGHT_BODY_BYTES
                heavy = await client.derender_step("chat", many)
                assert [without_clock(r) for r in heavy] == [
                    without_clock(await client.derender("chat", body)) for body in many]
                return await client.derender_step("chat", [good[0], forged, good[1]])

        mixed = asyncio.run(main())
        assert [r.get("status") for r in mixed] == [None, 400, None]
        assert mixed[1]["error"]["param"] == "stream_state"
        code, out, _ = post(s.url + "/v1/derender/step", b'{"endpoint": "chat", "items": [], "x": 1}')
        assert code == 400 and json.loads(out)["error"]["type"] == "BadRequestError"
    finally:
        s.close()
    local = Derenderer(registry)
    for x in streams:
        assert fold_completion(x.out) == expected_completion(whole(local, "completion", x.base, x.choice,
                                                                   request_id=x.chunks[0]["request_id"]))


def test_the_step_route_is_in_the_openapi_document() -> None:
    from api.openapi import openapi_document

    doc = json.loads(openapi_document())
    op = doc["paths"]["/v1/derender/step"]["post"]
    assert op["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/DerenderStepRequest")
    step = doc["components"]["schemas"]["DerenderStepRequest"]
    assert step["properties"]["items"]["maxItems"] == STEP_MAX_ITEMS and step["additionalProperties"] is False
    endpoint = next(p for p in doc["paths"]["/v1/jobs"]["post"]["parameters"] if p["name"] == "endpoint")
    assert "step" in endpoint["schema"]["enum"]


async def test_a_step_as_an_asynchronous_job(registry, prefix) -> None:
    good, _ = _good_items(Derenderer(registry))
    async with queue_stack(registry, prefix) as (app, server):
        code, accepted = await _post_json(app, "/v1/jobs?endpoint=step", _step_body("chat", good))
        assert code == 202
        job_id = json.loads(accepted)["id"]
        redis = fakeredis.FakeAsyncRedis(server=server)
        async with DerenderClient(redis=redis, key_prefix=prefix) as client:
            result = await client.wait(job_id)
    assert result.status == 200
    assert [set(r) for r in result.json()["results"]] == [{"chunk", "stream_state"}] * len(good)
