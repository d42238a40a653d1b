"""vLLM 0.33's recorded streams for the Llama-style family
(tests/golden/streams_llama.jsonl, record_llama.py): every chunk equals
vLLM's after the deliberate differences of tests/test_stream_vllm.py, the
folded stream too, and vLLM's state is continued by us after any chunk."""

from __future__ import annotations

import json

import pytest
from stream_support import run_stream
from test_golden import llama_model_dir
from test_stream_vllm import GOLDEN, _vllm_bodies, endpoint, folded, normal

from derender_queue.core import Derenderer, ModelConfig, ModelRegistry

with open(GOLDEN / "streams_llama.jsonl", encoding="utf-8") as f:
    STREAMS = [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def derenderer(tmp_path_factory) -> Derenderer:
    path = llama_model_dir(tmp_path_factory.mktemp("llama"))
    return Derenderer(ModelRegistry((ModelConfig(name="llama-fixture", tokenizer=str(path), max_model_len=4096),),
                                    preload=False))


def ours(d: Derenderer, s: dict, state=None, start: int = 0) -> list[dict]:
    return run_stream(d, endpoint(s), {**s["base"], "model": "llama-fixture"}, s["chunks"][start:], state=state)


@pytest.mark.parametrize("s", STREAMS, ids=lambda s: s["name"])
def test_chunks_equal_vllms(derenderer, s):
    mine = ours(derenderer, s)
    assert [normal(r["chunk"]) for r in mine] == [normal(b["chunk"]) for b in _vllm_bodies(s)]
    assert folded(s, mine) == folded(s, _vllm_bodies(s))


@pytest.mark.parametrize("s", STREAMS, ids=lambda s: s["name"])
def test_continues_from_vllms_state(derenderer, s):
    theirs = _vllm_bodies(s)
    expected = folded(s, theirs)
    for k in range(1, len(s["chunks"])):
        mixed = theirs[:k] + ours(derenderer, s, state=theirs[k - 1]["stream_state"], start=k)
        assert folded(s, mixed) == expected, f"handed over after chunk {k}"
