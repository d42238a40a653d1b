"""Each release's recorded streams for the Llama-style family
(tests/golden/streams_llama.jsonl, v0.34/streams_llama.jsonl.gz;
record_llama.py): every chunk equals vLLM's after the deliberate
differences of tests/core/test_stream_vllm.py, the folded stream too, and
vLLM's state is continued by us after any chunk."""

from __future__ import annotations

import pytest

from derender_queue.core import Derenderer, ModelConfig, ModelRegistry
from tests.core.test_golden import llama_model_dir
from tests.core.test_stream_vllm import _vllm_bodies, endpoint, folded, normal, sid
from tests.helpers.golden_files import RELEASES, recorded
from tests.helpers.stream_support import run_stream

STREAMS = [s | {"release": release} for release in RELEASES for s in recorded(release, "streams_llama")]


@pytest.fixture(scope="module")
def derenderers(tmp_path_factory) -> dict[str, Derenderer]:
    path = llama_model_dir(tmp_path_factory.mktemp("llama"))
    return {release: Derenderer(ModelRegistry((ModelConfig(name="llama-fixture", tokenizer=str(path),
                                                           max_model_len=4096, compat=release),), preload=False))
            for release in RELEASES}


def ours(d: Derenderer, s: dict, state=None, start: int = 0) -> list[dict]:
    return run_stream(d, endpoint(s), {**s["base"], "model": "llama-fixture"}, s["chunks"][start:], state=state)


def _ignored_flag(s: dict) -> bool:
    """0.33 ignores return_tokens_as_token_ids; ours spells `token_id:N` (test_stream_vllm.py DELIBERATE)."""
    return s["release"] == "0.33" and "tokens_as_ids" in s["name"]


@pytest.mark.parametrize("s", STREAMS, ids=sid)
def test_chunks_equal_vllms(derenderers, s):
    derenderer = derenderers[s["release"]]
    mine = ours(derenderer, s)
    if _ignored_flag(s):
        folded_mine, theirs = folded(s, mine), folded(s, _vllm_bodies(s))
        assert (folded_mine.get("content"), folded_mine.get("text")) == (theirs.get("content"), theirs.get("text"))
        assert "token_id:" in str(folded_mine["logprobs"]) and "token_id:" not in str(theirs["logprobs"])
        return
    assert [normal(r["chunk"]) for r in mine] == [normal(b["chunk"]) for b in _vllm_bodies(s)]
    assert folded(s, mine) == folded(s, _vllm_bodies(s))


@pytest.mark.parametrize("s", [s for s in STREAMS if not _ignored_flag(s)], ids=sid)
def test_continues_from_vllms_state(derenderers, s):
    derenderer = derenderers[s["release"]]
    theirs = _vllm_bodies(s)
    expected = folded(s, theirs)
    for k in range(1, len(s["chunks"])):
        mixed = theirs[:k] + ours(derenderer, s, state=theirs[k - 1]["stream_state"], start=k)
        assert folded(s, mixed) == expected, f"handed over after chunk {k}"
