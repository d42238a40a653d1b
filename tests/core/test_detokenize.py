"""Incremental detokenization == vLLM 0.33's algorithm, and == tokenizers' decode
where vLLM's algorithm and plain decoding agree (valid UTF-8 text).

Strategies aim at the hard cases: pieces of characters split across tokens,
special and added tokens, CJK and emoji, on the ByteLevel DeepSeek V4
vocabulary and on two byte-fallback Metaspace tokenizers built in the session.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from derender_queue.core.detokenize import Detokenizer, seed_state
from tests.helpers.vllm_reference import ReferenceDetokenizer

TEXTS = [
    "Hello world, this is plain English.",
    "東京は日本の首都です。中文汉字测试。",
    "emoji 🚀👩‍👩‍👧‍👦🇯🇵 and ZWJ",
    "café naïve Größe",
    "def f(x):\n    return x * 2\n",
    "\ufffd literal replacement char",
]


def _pools(model) -> dict[str, list[int]]:
    vocab = model.vocab
    tok = vocab.tokenizer
    from_text = sorted({i for t in TEXTS for i in tok.encode(t).ids})
    # Special tokens plus the first added tokens (markers such as <think>).
    added = sorted(vocab.special_ids | set(sorted(tok.get_added_tokens_decoder())[:40]))
    return {
        "partial": sorted(vocab.partial_ids) or from_text,
        "special": added,
        "text": from_text,
        "any": list(range(vocab.size)),
    }


def id_lists(model, max_size=40):
    pools = _pools(model)
    one = st.one_of(
        st.sampled_from(pools["partial"]),
        st.sampled_from(pools["special"]),
        st.sampled_from(pools["text"]),
        st.sampled_from(pools["any"]),
    )
    real = st.sampled_from(TEXTS).map(lambda t: model.vocab.tokenizer.encode(t).ids)
    mixed = st.tuples(real, st.lists(one, max_size=5)).map(lambda p: p[0] + p[1])
    return st.one_of(st.lists(one, max_size=max_size), real, mixed)


def _check(model, prompt, ids, skip, cuts):
    vocab = model.vocab
    ref = ReferenceDetokenizer(vocab.tokenizer, vocab.special_ids)
    expected_text, (exp_tokens, exp_prefix, exp_read) = ref.feed(ref.seed(prompt, skip), ids, skip)
    detok = Detokenizer(vocab, skip)
    state = seed_state(vocab, prompt, skip)
    parts = []
    bounds = [*sorted({c % (len(ids) + 1) for c in cuts}), len(ids)]
    start = 0
    for end in bounds:
        text, state = detok.feed(state, ids[start:end])
        parts.append(text)
        start = end
    assert "".join(parts) == expected_text
    assert [vocab.pieces[t] for t in state.tokens] == exp_tokens
    assert (state.prefix, state.read) == (exp_prefix, exp_read)


@pytest.fixture(scope="module")
def strategies(deepseek, metaspace_registry):
    sp = [metaspace_registry.get(n) for n in metaspace_registry.names]
    return {"deepseek": (deepseek, id_lists(deepseek)), **{m.name: (m, id_lists(m)) for m in sp}}


@pytest.mark.parametrize("which", ["deepseek", "sp-llama", "sp-metaspace"])
def test_matches_vllm_algorithm_in_any_chunking(strategies, which):
    model, ids_strategy = strategies[which]

    @given(
        prompt=st.one_of(st.none(), ids_strategy),
        ids=ids_strategy,
        skip=st.booleans(),
        cuts=st.lists(st.integers(min_value=0, max_value=1000), max_size=4),
    )
    def run(prompt, ids, skip, cuts):
        _check(model, prompt, ids, skip, cuts)

    run()


@pytest.mark.parametrize("which", ["deepseek", "sp-llama", "sp-metaspace"])
def test_one_id_at_a_time_matches_vllm_algorithm(strategies, which):
    """A stream's 1-token chunks: on ByteLevel vocabularies most take the
    one-id fast path (`Detokenizer._feed_whole`)."""
    model, ids_strategy = strategies[which]

    @given(prompt=st.one_of(st.none(), ids_strategy), ids=ids_strategy, skip=st.booleans())
    def run(prompt, ids, skip):
        _check(model, prompt, ids, skip, cuts=list(range(len(ids))))

    run()


def test_one_id_fast_path_answers_as_the_clean_pass(strategies):
    """Wherever `_feed_whole` answers, `_feed_clean` gives the same text and
    window; and it does answer in a stream of plain text's steady state."""
    model, ids_strategy = strategies["deepseek"]
    vocab = model.vocab
    answered = []

    @given(prompt=st.one_of(st.none(), ids_strategy), ids=ids_strategy, nxt=ids_strategy)
    def run(prompt, ids, nxt):
        detok = Detokenizer(vocab, False)
        state = seed_state(vocab, prompt, False)
        for tid in ids:
            for candidate in [tid, *nxt[:3]]:
                fast = detok._feed_whole(state, candidate)
                if fast is not None:
                    answered.append(candidate)
                    assert fast == detok._feed_clean(state, [candidate])
            _, state = detok.feed(state, [tid])

    run()
    words = vocab.tokenizer.encode(TEXTS[0]).ids
    state = seed_state(vocab, None, False)
    for tid in words:
        _, state = Detokenizer(vocab, False).feed(state, [tid])
    assert Detokenizer(vocab, False)._feed_whole(state, words[-1]) is not None
    assert answered


@pytest.mark.parametrize("which", ["deepseek", "sp-llama", "sp-metaspace"])
@given(text=st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=60))
def test_valid_text_decodes_like_tokenizers(strategies, which, text):
    """For output that is whole characters, vLLM's text (seeded by a prompt)
    is exactly what the tokenizer decodes."""
    model, _ = strategies[which]
    tok = model.vocab.tokenizer
    prompt = tok.encode("Prompt: ", add_special_tokens=False).ids
    ids = tok.encode(text, add_special_tokens=False).ids
    detok = Detokenizer(model.vocab, skip_special=False)
    out, _ = detok.feed(seed_state(model.vocab, prompt, False), ids)
    full = tok.decode(prompt + ids, skip_special_tokens=False)
    head = tok.decode(prompt, skip_special_tokens=False)
    if "\ufffd" not in full:
        assert out == full[len(head):]


def test_trailing_partial_character_is_held_back(deepseek):
    """vLLM never emits a character whose last byte never arrived."""
    vocab = deepseek.vocab
    ids = vocab.tokenizer.encode("ok 🚀").ids
    cut = ids[:-1] if vocab.decode(ids[:-1]).endswith("\ufffd") else ids
    text, _ = Detokenizer(vocab, False).feed(seed_state(vocab, None, False), cut)
    assert "\ufffd" not in text and text.startswith("ok")


def test_skipped_special_tokens_vanish(deepseek):
    vocab = deepseek.vocab
    ids = vocab.tokenizer.encode("a b").ids
    text, _ = Detokenizer(vocab, True).feed(seed_state(vocab, None, True), [0, *ids, 1])
    assert text == "a b"
    kept, _ = Detokenizer(vocab, False).feed(seed_state(vocab, None, False), [*ids, 1])
    assert kept == "a b<｜end▁of▁sentence｜>"
