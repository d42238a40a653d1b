#!/usr/bin/env python3
"""Record golden fixtures for the derender endpoints from the real vLLM 0.33.

Run with the peer venv's python (it needs `tokenizers`, and the vLLM install
whose `vllm` console script sits next to the interpreter):

    /work/peer/venv/bin/python tools/golden/record_vllm.py

For every server config (`plain`, `r1_hermes`, `v4`) this starts
`vllm launch render` on a free local port, sends every case of that config
over HTTP, writes `cases_<config>.jsonl` (one case per line) into tests/golden/
(`--out`), and stops the server again. Servers run one at a time.

The case set is deterministic: every random choice comes from a
`random.Random` seeded with SEED and the case name, so adding a case never
changes another one. Only vLLM-generated random fields (`created`, generated
`id`s, tool call ids) differ between recordings; see README.md.

This file imports nothing from the project.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import http.client
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time

from tokenizers import Tokenizer

# The recorded goldens live with the tests that replay them.
HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests", "golden")
SEED = 20261202
MODEL_NAME = "deepseek-v4"
MAX_MODEL_LEN = 4096
MAX_LOGPROBS = 20  # vLLM's default (ModelConfig.max_logprobs); not passed
MAX_N_SEQUENCES = 16384  # vLLM's default VLLM_MAX_N_SEQUENCES; not changed
VOCAB_SIZE = 129280  # tokenizer.json incl. added tokens == config.json

CHAT = "/v1/chat/completions/derender"
COMP = "/v1/completions/derender"

CONFIGS: dict[str, list[str]] = {
    "plain": [],
    "r1_hermes": [
        "--reasoning-parser", "deepseek_r1",
        "--tool-call-parser", "hermes",
        "--enable-auto-tool-choice",
    ],
    "v4": [
        "--reasoning-parser", "deepseek_v4",
        "--tool-call-parser", "deepseek_v4",
        "--enable-auto-tool-choice",
    ],
    # A reasoning parser alone: 0.34's streams keep its engine over the whole output.
    "v4_reasoning": ["--reasoning-parser", "deepseek_v4"],
}

# Special / added token ids of the DeepSeek V4 tokenizer.
BOS, EOS, PAD = 0, 1, 2
PLACEHOLDER_0, PLACEHOLDER_799 = 128000, 128799
USER_TOK, ASSISTANT_TOK = 128803, 128804
THINK, END_THINK = 128821, 128822
DSML_TOK = 128825

TOK: Tokenizer | None = None


def enc(text: str) -> list[int]:
    assert TOK is not None
    return TOK.encode(text, add_special_tokens=False).ids


def enc_parts(*parts: str) -> list[int]:
    """Encode each part on its own, so e.g. "<", "think", ">" stay plain
    characters instead of becoming the added token <think>."""
    out: list[int] = []
    for p in parts:
        out.extend(enc(p))
    return out


def dec(ids: list[int]) -> str:
    assert TOK is not None
    return TOK.decode(ids, skip_special_tokens=False)


def rng_for(name: str) -> random.Random:
    return random.Random(f"{SEED}:{name}")


# --------------------------------------------------------------------------
# Texts
# --------------------------------------------------------------------------

TEXTS: dict[str, str] = {
    "english": (
        "The quick brown fox jumps over the lazy dog. Meanwhile, in a small "
        "village by the sea, the fishermen were mending their nets and "
        "talking about the weather."
    ),
    "python": (
        "def fib(n: int) -> int:\n"
        '    """Return the n-th Fibonacci number."""\n'
        "    a, b = 0, 1\n"
        "    for _ in range(n):\n"
        "        a, b = b, a + b\n"
        "    return a\n\n"
        'if __name__ == "__main__":\n'
        "\tprint([fib(i) for i in range(10)])  # tab-indented\n"
    ),
    "chinese": (
        "深度学习是机器学习的一个分支，它使用多层神经网络来学习数据的表示。"
        "今天天气很好，我们去公园散步吧！"
    ),
    "japanese": (
        "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"
        "カタカナとひらがなを混ぜてテストします。"
    ),
    "korean": "안녕하세요, 세계! 한국어 텍스트입니다.",
    "emoji": (
        "Great job 👍🏽! Family: 👨‍👩‍👧‍👦, flags: 🇯🇵🇫🇷🇧🇷, rainbow 🏳️‍🌈, "
        "keycap 1️⃣, 🤖🔥✨"
    ),
    "accented": (
        "Crème brûlée, naïve façade, Ångström, Łódź, Straße, ñandú, "
        "São Paulo, İstanbul, Ærøskøbing"
    ),
    "mixed": (
        "Price: 42€ (≈ ¥6,300) — «quoted» “smart” ‘quotes’; math: ∑ᵢ xᵢ² ≤ ∞; "
        "العربية עברית हिन्दी ไทย; combining: e\u0301 a\u0308 | 中文 and English"
    ),
    "whitespace": "  leading spaces\n\n\ttabbed line\r\nCRLF line   trailing   \n\n\n",
    "fffd": "A genuine replacement char: \ufffd and another \ufffd\ufffd end.",
    "markdown": (
        "## Heading\n\n- item **bold** and `code`\n- [link](https://example.com)"
        '\n\n```json\n{"a": 1}\n```\n'
    ),
    "json": '{"name": "Ada", "langs": ["en", "fr"], "age": 36, "nested": {"ok": true}}',
    "single_space": " ",
    "single_char": "A",
}

PROMPT_TEXT = "User: Say something nice.\nAssistant:"
MSGS = [{"role": "user", "content": "hi"}]


def chat_req(**kw):
    return {"messages": MSGS, **kw}


def comp_req(**kw):
    return {"prompt": "hi", **kw}


MISSING = object()


def gch(ids, index=0, finish="stop", stop_reason=MISSING, logprobs=None, **kw):
    """A GenerateTokensChoice. finish=MISSING omits finish_reason."""
    c: dict = {"index": index}
    if ids is not MISSING:
        c["token_ids"] = ids
    if finish is not MISSING:
        c["finish_reason"] = finish
    if stop_reason is not MISSING:
        c["stop_reason"] = stop_reason
    if logprobs is not None:
        c["logprobs"] = logprobs
    c.update(kw)
    return c


def gresp(choices, rid="gen-0", prompt_token_ids=None, **kw):
    """A GenerateTokensResponse (output_mode tokens, the default)."""
    g: dict = {}
    if rid is not None:
        g["request_id"] = rid
    g["choices"] = choices
    if prompt_token_ids is not None:
        g["prompt_token_ids"] = prompt_token_ids
    g.update(kw)
    return g


# A pool of candidate ids for top logprobs: ordinary text tokens plus
# byte-fallback pieces of multi-byte characters.
_CAND_POOL: list[int] = []


def cand_pool() -> list[int]:
    if not _CAND_POOL:
        s = set()
        for t in TEXTS.values():
            s.update(enc(t))
        _CAND_POOL.extend(sorted(s))
    return _CAND_POOL


def make_logprobs(rng, ids, k, layout="engine", ranks=True, sampled_rank=None):
    """Int-id logprobs as /inference/v1/generate returns them in 0.33.

    layout "engine": top_logprobs = [sampled] + top-k (k+1 entries; the
        sampled token appears twice when it is inside the top k).
    layout "distinct": top_logprobs = [sampled] + (k-1) other ids, no repeat.
    """
    pool = cand_pool()
    content = []
    for tid in ids:
        r = sampled_rank if sampled_rank is not None else (
            1 if rng.random() < 0.7 else rng.randint(2, 40))
        n = max(k, 1) + 1
        vals = sorted((round(-rng.expovariate(0.8), 4) for _ in range(n)),
                      reverse=True)
        cands = []
        used = {tid}
        if layout == "engine":
            for j in range(k):
                rank = j + 1
                if rank == r:
                    cid = tid
                else:
                    while True:
                        cid = (rng.choice(pool) if rng.random() < 0.5
                               else rng.randrange(3, 128000))
                        if cid not in used:
                            break
                    used.add(cid)
                cands.append({"token_id": cid, "logprob": vals[j], "rank": rank})
            s_lp = vals[r - 1] if r <= k else round(vals[-1] - rng.random() * 2 - 0.01, 4)
        else:
            s_lp = vals[0]
            for j in range(max(k - 1, 0)):
                while True:
                    cid = (rng.choice(pool) if rng.random() < 0.5
                           else rng.randrange(3, 128000))
                    if cid not in used:
                        break
                used.add(cid)
                cands.append({"token_id": cid, "logprob": vals[j + 1], "rank": j + 2})
            r = 1
        sampled = {"token_id": tid, "logprob": s_lp, "rank": r}
        top = [dict(sampled), *cands]
        entry = {**sampled, "top_logprobs": top}
        if not ranks:
            entry.pop("rank")
            for t in entry["top_logprobs"]:
                t.pop("rank")
        content.append(entry)
    return {"content": content}


# --------------------------------------------------------------------------
# Case collection
# --------------------------------------------------------------------------


class Cases:
    def __init__(self, config: str):
        self.config = config
        self.items: list[dict] = []
        self._names: set[str] = set()

    def add(self, name, path, request=MISSING, *, raw=None, raw_bytes=None,
            headers=None, note=None):
        assert name not in self._names, name
        self._names.add(name)
        case: dict = {"name": name, "config": self.config, "path": path}
        if note:
            case["note"] = note
        if headers:
            case["headers"] = headers
        if raw_bytes is not None:
            case["raw_request_b64"] = base64.b64encode(raw_bytes).decode()
            body = raw_bytes
        elif raw is not None:
            case["raw_request"] = raw
            body = raw.encode("utf-8")
        else:
            assert request is not MISSING
            try:
                text = json.dumps(request, ensure_ascii=False, allow_nan=False)
                case["request"] = request
            except ValueError:
                # NaN / Infinity: JSON has no literal for them. Python writes
                # NaN / Infinity / -Infinity, which vLLM's parser accepts. The
                # fixture keeps the exact text so the file stays strict JSON.
                text = json.dumps(request, ensure_ascii=False, allow_nan=True)
                case["raw_request"] = text
                case["nonfinite"] = True
            body = text.encode("utf-8")
        case["_body"] = body
        self.items.append(case)

    def chat(self, name, gen, chat_request=MISSING, note=None, **top):
        req: dict = {}
        req.update(top)
        req["generate_response"] = gen
        if chat_request is not MISSING:
            req["chat_request"] = chat_request
        self.add(name, CHAT, req, note=note)

    def comp(self, name, gens, completion_request=MISSING, note=None, **top):
        req: dict = {}
        req.update(top)
        req["generate_responses"] = gens
        if completion_request is not MISSING:
            req["completion_request"] = completion_request
        self.add(name, COMP, req, note=note)


# --------------------------------------------------------------------------
# Plain (no parser) cases
# --------------------------------------------------------------------------


def add_decode_corpus(C: Cases, chat_request=MISSING, completion_request=MISSING,
                      prefix=""):
    for key, text in TEXTS.items():
        ids = enc(text)
        C.chat(f"{prefix}chat_decode_{key}_eos", gresp([gch([*ids, EOS])], rid=f"chat-{key}"),
               chat_request=chat_request)
        C.comp(f"{prefix}comp_decode_{key}_eos", [gresp([gch([*ids, EOS])], rid=f"cmpl-{key}")],
               completion_request=completion_request)


def add_decode_variants(C: Cases):
    # length-finished outputs (no EOS), no finish_reason at all, null finish.
    for key in ("english", "chinese", "emoji", "python"):
        ids = enc(TEXTS[key])
        C.chat(f"chat_decode_{key}_length", gresp([gch(ids, finish="length")]))
        C.comp(f"comp_decode_{key}_length", [gresp([gch(ids, finish="length")])])
    ids = enc(TEXTS["english"])
    C.chat("chat_finish_reason_omitted_eos", gresp([gch([*ids, EOS], finish=MISSING)]),
           note="finish_reason omitted -> GenerateTokensChoice default 'stop'")
    C.chat("chat_finish_reason_null_eos", gresp([gch([*ids, EOS], finish=None)]))
    C.chat("chat_finish_reason_null_no_eos", gresp([gch(ids, finish=None)]))
    C.comp("comp_finish_reason_omitted_eos", [gresp([gch([*ids, EOS], finish=MISSING)])])
    C.comp("comp_finish_reason_null_eos", [gresp([gch([*ids, EOS], finish=None)])])
    C.chat("chat_finish_reason_abort", gresp([gch(ids[:5], finish="abort")]))
    C.comp("comp_finish_reason_custom_string", [gresp([gch(ids[:5], finish="repetition",
                                                           stop_reason="repetition")])])
    C.chat("chat_finish_reason_length_ends_eos", gresp([gch([*ids, EOS], finish="length")]),
           note="EOS only dropped for finish_reason stop")
    C.chat("chat_only_eos", gresp([gch([EOS])]))
    C.comp("comp_only_eos", [gresp([gch([EOS])])])
    C.chat("chat_only_bos", gresp([gch([BOS])]))
    C.chat("chat_eos_eos", gresp([gch([EOS, EOS])]))
    C.chat("chat_eos_in_middle", gresp([gch([*ids[:4], EOS, *ids[4:8], EOS])]))


def add_cut_mid_char(C: Cases):
    """Outputs whose last token ends inside a multi-byte UTF-8 character."""
    for key in ("emoji", "chinese", "japanese", "mixed", "accented", "korean"):
        ids = enc(TEXTS[key])
        cuts = []
        for n in range(1, len(ids)):
            if dec(ids[:n]).endswith("\ufffd") and "\ufffd" not in dec(ids[:n])[:-1]:
                cuts.append(n)
        r = rng_for(f"cut-{key}")
        chosen = sorted(r.sample(cuts, min(3, len(cuts)))) if cuts else []
        for n in chosen:
            part = ids[:n]
            C.chat(f"chat_cut_mid_char_{key}_{n}_length", gresp([gch(part, finish="length")]))
            C.comp(f"comp_cut_mid_char_{key}_{n}_length", [gresp([gch(part, finish="length")])])
            C.chat(f"chat_cut_mid_char_{key}_{n}_eos", gresp([gch([*part, EOS])]),
                   note="partial char followed by EOS")
        if chosen:
            n = chosen[0]
            lp = make_logprobs(r, ids[:n], 3)
            C.chat(f"chat_cut_mid_char_{key}_{n}_logprobs",
                   gresp([gch(ids[:n], finish="length", logprobs=lp)]),
                   chat_request=chat_req(logprobs=True, top_logprobs=3))
            C.comp(f"comp_cut_mid_char_{key}_{n}_logprobs",
                   [gresp([gch(ids[:n], finish="length", logprobs=lp)])],
                   completion_request=comp_req(logprobs=2))
    # a lone lead byte token (start of a 4-byte sequence) and lone
    # continuation byte tokens
    for s in ("ð", "Ł", "¨", "ĳ"):
        tid = TOK.token_to_id(s)
        if tid is None:
            continue
        C.chat(f"chat_lone_byte_token_{tid}", gresp([gch([tid], finish="length")]))
        C.chat(f"chat_lone_byte_token_{tid}_between_text",
               gresp([gch([*enc("ab"), tid, *enc(" cd")], finish="length")]))
        C.comp(f"comp_lone_byte_token_{tid}_between_text",
               [gresp([gch([*enc("ab"), tid, *enc(" cd")], finish="length")])])
    # genuine U+FFFD at the very end
    ids = enc("ends with replacement \ufffd")
    C.chat("chat_genuine_fffd_at_end", gresp([gch(ids, finish="length")]))
    C.comp("comp_genuine_fffd_at_end", [gresp([gch(ids, finish="length")])])
    lp = make_logprobs(rng_for("fffd-lp"), ids, 2)
    C.chat("chat_genuine_fffd_at_end_logprobs", gresp([gch(ids, finish="length", logprobs=lp)]),
           chat_request=chat_req(logprobs=True, top_logprobs=2))


def add_random_ids(C: Cases):
    for i in range(6):
        r = rng_for(f"random-{i}")
        n = r.randint(5, 80)
        ids = [r.randrange(3, 128000) for _ in range(n)]
        C.chat(f"chat_random_vocab_{i}", gresp([gch(ids, finish="length")]))
        C.comp(f"comp_random_vocab_{i}", [gresp([gch(ids, finish="length")])])
    for i in range(4):
        r = rng_for(f"random-full-{i}")
        n = r.randint(5, 60)
        ids = [r.randrange(0, VOCAB_SIZE) for _ in range(n)]
        ids += [r.randrange(128000, VOCAB_SIZE) for _ in range(5)]
        r.shuffle(ids)
        C.chat(f"chat_random_full_vocab_{i}", gresp([gch(ids, finish="length")]))
        C.chat(f"chat_random_full_vocab_{i}_keep_special", gresp([gch(ids, finish="length")]),
               chat_request=chat_req(skip_special_tokens=False))
        C.comp(f"comp_random_full_vocab_{i}", [gresp([gch(ids, finish="length")])])
        C.comp(f"comp_random_full_vocab_{i}_keep_special", [gresp([gch(ids, finish="length")])],
               completion_request=comp_req(skip_special_tokens=False))
    for i in range(3):
        r = rng_for(f"random-lp-{i}")
        ids = [r.randrange(3, 128000) for _ in range(r.randint(5, 30))]
        lp = make_logprobs(r, ids, 5)
        C.chat(f"chat_random_vocab_logprobs_{i}", gresp([gch(ids, finish="length", logprobs=lp)]),
               chat_request=chat_req(logprobs=True, top_logprobs=5))
        C.comp(f"comp_random_vocab_logprobs_{i}", [gresp([gch(ids, finish="length", logprobs=lp)])],
               completion_request=comp_req(logprobs=5))


def special_mix():
    e = enc
    return [*e("Hello"), BOS, *e(" world"), PAD, *e("!"), PLACEHOLDER_0,
            *e(" user:"), USER_TOK, *e(" hi"), ASSISTANT_TOK, THINK,
            *e("reason"), END_THINK, *e(" done"), DSML_TOK, *e("x"),
            PLACEHOLDER_799, 128805, 129279, *e(" end")]


def add_special_tokens(C: Cases):
    ids = special_mix()
    variants = [
        ("default", MISSING, MISSING),
        ("no_request", MISSING, MISSING),
        ("skip_special_true", chat_req(skip_special_tokens=True),
         comp_req(skip_special_tokens=True)),
        ("skip_special_false", chat_req(skip_special_tokens=False),
         comp_req(skip_special_tokens=False)),
        ("skip_false_no_spaces", chat_req(skip_special_tokens=False,
                                          spaces_between_special_tokens=False),
         comp_req(skip_special_tokens=False, spaces_between_special_tokens=False)),
        ("skip_true_no_spaces", chat_req(spaces_between_special_tokens=False),
         comp_req(spaces_between_special_tokens=False)),
    ]
    for tag, cr, pr in variants:
        if tag == "default":
            cr, pr = chat_req(), comp_req()
        C.chat(f"chat_special_tokens_{tag}", gresp([gch([*ids, EOS])]), chat_request=cr)
        C.comp(f"comp_special_tokens_{tag}", [gresp([gch([*ids, EOS])])], completion_request=pr)
    # adjacent special tokens
    adj = [USER_TOK, ASSISTANT_TOK, THINK, END_THINK, BOS, PAD, 128000, 128001, *enc("x")]
    C.chat("chat_adjacent_special_skip_false", gresp([gch(adj, finish="length")]),
           chat_request=chat_req(skip_special_tokens=False))
    C.chat("chat_adjacent_special_skip_false_no_spaces", gresp([gch(adj, finish="length")]),
           chat_request=chat_req(skip_special_tokens=False, spaces_between_special_tokens=False))
    C.chat("chat_adjacent_special_default", gresp([gch(adj, finish="length")]))
    C.comp("comp_adjacent_special_skip_false", [gresp([gch(adj, finish="length")])],
           completion_request=comp_req(skip_special_tokens=False))
    # special tokens with logprobs
    lp = make_logprobs(rng_for("special-lp"), ids, 2)
    C.chat("chat_special_tokens_logprobs", gresp([gch(ids, finish="length", logprobs=lp)]),
           chat_request=chat_req(logprobs=True, top_logprobs=2))
    C.comp("comp_special_tokens_logprobs", [gresp([gch(ids, finish="length", logprobs=lp)])],
           completion_request=comp_req(logprobs=1))
    # <think> built from plain characters vs the added tokens
    C.chat("chat_think_tokens_plain_config", gresp([gch([THINK, *enc("r"), END_THINK, *enc("c"), EOS])]))
    C.chat("chat_think_plain_chars_plain_config",
           gresp([gch([*enc_parts("<", "think", ">", "r", "</", "think", ">", "c"), EOS])]))


def add_logprobs_chat(C: Cases):
    base_texts = ("english", "chinese", "emoji", "accented")
    for key in base_texts:
        ids = enc(TEXTS[key])[:40]
        r = rng_for(f"lpchat-{key}")
        # 20 entries per position (sampled + top 19): the most max_logprobs allows
        lp20 = make_logprobs(r, [*ids, EOS], 19)
        for tl in (0, 1, 5, 20):
            C.chat(f"chat_logprobs_{key}_top{tl}", gresp([gch([*ids, EOS], logprobs=lp20)]),
                   chat_request=chat_req(logprobs=True, top_logprobs=tl))
        C.chat(f"chat_logprobs_{key}_no_chat_request", gresp([gch([*ids, EOS], logprobs=lp20)]))
    ids = enc(TEXTS["english"])[:8]
    lp_engine20 = make_logprobs(rng_for("lpchat-engine20"), ids, 20)
    C.chat("err_chat_logprobs_engine_top20_is_21_entries", gresp([gch(ids, finish="length", logprobs=lp_engine20)]),
           chat_request=chat_req(logprobs=True, top_logprobs=20),
           note="sampled + top-20 = 21 entries, over max_logprobs (20)")
    C.comp("err_comp_logprobs_engine_top20_is_21_entries", [gresp([gch(ids, finish="length", logprobs=lp_engine20)])],
           completion_request=comp_req(logprobs=20))
    ids = enc(TEXTS["english"])[:20]
    r = rng_for("lpchat-misc")
    lp5 = make_logprobs(r, ids, 5)
    C.chat("chat_logprobs_top_minus1", gresp([gch(ids, finish="length", logprobs=lp5)]),
           chat_request=chat_req(logprobs=True, top_logprobs=-1))
    C.chat("chat_logprobs_flag_false_keeps_all", gresp([gch(ids, finish="length", logprobs=lp5)]),
           chat_request=chat_req(logprobs=False),
           note="chat_request.logprobs false: no cut, logprobs still returned")
    C.chat("chat_logprobs_top_logprobs_absent", gresp([gch(ids, finish="length", logprobs=lp5)]),
           chat_request=chat_req(logprobs=True))
    C.chat("chat_logprobs_top_logprobs_null", gresp([gch(ids, finish="length", logprobs=lp5)]),
           chat_request=chat_req(logprobs=True, top_logprobs=None))
    C.chat("chat_logprobs_top3_of_5", gresp([gch(ids, finish="length", logprobs=lp5)]),
           chat_request=chat_req(logprobs=True, top_logprobs=3))
    C.chat("chat_logprobs_top10_more_than_given", gresp([gch(ids, finish="length", logprobs=lp5)]),
           chat_request=chat_req(logprobs=True, top_logprobs=10))
    C.chat("chat_logprobs_top25_request", gresp([gch(ids, finish="length", logprobs=lp5)]),
           chat_request=chat_req(logprobs=True, top_logprobs=25),
           note="request top_logprobs above max_logprobs, entries below")
    C.chat("chat_logprobs_logprob_token_ids", gresp([gch(ids, finish="length", logprobs=lp5)]),
           chat_request=chat_req(logprobs=True, top_logprobs=1, logprob_token_ids=[3, 4, 5]))
    C.chat("chat_logprobs_return_tokens_as_token_ids",
           gresp([gch(ids, finish="length", logprobs=lp5)]),
           chat_request=chat_req(logprobs=True, top_logprobs=2, return_tokens_as_token_ids=True),
           note="0.33 derender ignores return_tokens_as_token_ids")
    lpd = make_logprobs(rng_for("lpchat-distinct"), ids, 5, layout="distinct")
    C.chat("chat_logprobs_distinct_layout_top5", gresp([gch(ids, finish="length", logprobs=lpd)]),
           chat_request=chat_req(logprobs=True, top_logprobs=5))
    lpn = make_logprobs(rng_for("lpchat-norank"), ids, 3, ranks=False)
    C.chat("chat_logprobs_no_rank_fields", gresp([gch(ids, finish="length", logprobs=lpn)]),
           chat_request=chat_req(logprobs=True, top_logprobs=3))
    lps = make_logprobs(rng_for("lpchat-sampledonly"), ids, 0)
    C.chat("chat_logprobs_sampled_only_top0", gresp([gch(ids, finish="length", logprobs=lps)]),
           chat_request=chat_req(logprobs=True, top_logprobs=0))
    C.chat("chat_logprobs_sampled_only_top5", gresp([gch(ids, finish="length", logprobs=lps)]),
           chat_request=chat_req(logprobs=True, top_logprobs=5))
    empty_top = {"content": [{"token_id": t, "logprob": -0.25, "rank": 1, "top_logprobs": []}
                             for t in ids]}
    C.chat("chat_logprobs_empty_top_lists", gresp([gch(ids, finish="length", logprobs=empty_top)]),
           chat_request=chat_req(logprobs=True, top_logprobs=2))
    no_top = {"content": [{"token_id": t, "logprob": -0.25} for t in ids]}
    C.chat("chat_logprobs_top_field_omitted", gresp([gch(ids, finish="length", logprobs=no_top)]),
           chat_request=chat_req(logprobs=True, top_logprobs=2))
    C.chat("chat_logprobs_content_null", gresp([gch(ids, finish="length", logprobs={"content": None})]),
           chat_request=chat_req(logprobs=True, top_logprobs=2))
    C.chat("chat_logprobs_content_empty", gresp([gch(ids, finish="length", logprobs={"content": []})]),
           chat_request=chat_req(logprobs=True, top_logprobs=2))
    C.chat("chat_logprobs_object_empty", gresp([gch(ids, finish="length", logprobs={})]),
           chat_request=chat_req(logprobs=True, top_logprobs=2))
    C.chat("chat_logprobs_null", gresp([gch(ids, finish="length", logprobs=None)]),
           chat_request=chat_req(logprobs=True, top_logprobs=2))
    short = {"content": lp5["content"][:5]}
    C.chat("chat_logprobs_shorter_than_tokens", gresp([gch(ids, finish="length", logprobs=short)]),
           chat_request=chat_req(logprobs=True, top_logprobs=2))
    longer = make_logprobs(rng_for("lpchat-longer"), ids + enc(" extra tokens here"), 2)
    C.chat("chat_logprobs_longer_than_tokens", gresp([gch(ids, finish="length", logprobs=longer)]),
           chat_request=chat_req(logprobs=True, top_logprobs=2))
    other = make_logprobs(rng_for("lpchat-other"), enc("completely different words"), 2)
    C.chat("chat_logprobs_ids_differ_from_tokens", gresp([gch(ids[:4], finish="length", logprobs=other)]),
           chat_request=chat_req(logprobs=True, top_logprobs=2))
    # EOS at the end: logprob entry for the EOS token is kept even if text drops it
    lpe = make_logprobs(rng_for("lpchat-eos"), [*ids[:6], EOS], 2)
    C.chat("chat_logprobs_with_eos_entry", gresp([gch([*ids[:6], EOS], logprobs=lpe)]),
           chat_request=chat_req(logprobs=True, top_logprobs=2))
    # special values
    vals = [-9999.0, 0.0, -0.0, -1e-12, -123456.789, -3.4028234663852886e38, 5.0]
    sp = {"content": [{"token_id": t, "logprob": v, "rank": i + 1,
                       "top_logprobs": [{"token_id": t, "logprob": v, "rank": i + 1},
                                        {"token_id": 3, "logprob": -9999.0, "rank": 2}]}
                      for i, (t, v) in enumerate(zip(ids, vals, strict=False))]}  # the first len(vals) ids
    C.chat("chat_logprobs_special_values", gresp([gch(ids[:len(vals)], finish="length", logprobs=sp)]),
           chat_request=chat_req(logprobs=True, top_logprobs=2))
    C.comp("comp_logprobs_special_values", [gresp([gch(ids[:len(vals)], finish="length", logprobs=sp)])],
           completion_request=comp_req(logprobs=1))
    big_rank = {"content": [{"token_id": t, "logprob": -20.0, "rank": 129279,
                             "top_logprobs": [{"token_id": t, "logprob": -20.0, "rank": 129279}]}
                            for t in ids[:3]]}
    C.chat("chat_logprobs_huge_rank", gresp([gch(ids[:3], finish="length", logprobs=big_rank)]),
           chat_request=chat_req(logprobs=True, top_logprobs=1))
    # top logprobs whose ids are special / added / byte pieces
    spec = {"content": [{"token_id": t, "logprob": -0.1, "rank": 1,
                         "top_logprobs": [{"token_id": t, "logprob": -0.1, "rank": 1},
                                          {"token_id": EOS, "logprob": -2.0, "rank": 2},
                                          {"token_id": THINK, "logprob": -3.0, "rank": 3},
                                          {"token_id": PLACEHOLDER_0, "logprob": -4.0, "rank": 4},
                                          {"token_id": TOK.token_to_id("ð"), "logprob": -5.0, "rank": 5}]}
                        for t in ids[:4]]}
    C.chat("chat_logprobs_top_special_ids", gresp([gch(ids[:4], finish="length", logprobs=spec)]),
           chat_request=chat_req(logprobs=True, top_logprobs=5))
    C.comp("comp_logprobs_top_special_ids", [gresp([gch(ids[:4], finish="length", logprobs=spec)])],
           completion_request=comp_req(logprobs=4))
    # multi-byte chars split across logprob tokens (U+FFFD correction)
    for key in ("emoji", "japanese"):
        eids = enc(TEXTS[key])
        lpm = make_logprobs(rng_for(f"lpchat-mb-{key}"), eids, 2)
        C.chat(f"chat_logprobs_multibyte_{key}", gresp([gch(eids, finish="length", logprobs=lpm)]),
               chat_request=chat_req(logprobs=True, top_logprobs=2))


def add_logprobs_completion(C: Cases):
    for key in ("english", "chinese", "emoji"):
        ids = enc(TEXTS[key])[:40]
        lp = make_logprobs(rng_for(f"lpcomp-{key}"), [*ids, EOS], 6)
        for lpv in (None, 0, 1, 5):
            tag = "none" if lpv is None else str(lpv)
            C.comp(f"comp_logprobs_{key}_logprobs_{tag}", [gresp([gch([*ids, EOS], logprobs=lp)])],
                   completion_request=comp_req(logprobs=lpv))
        C.comp(f"comp_logprobs_{key}_no_completion_request", [gresp([gch([*ids, EOS], logprobs=lp)])])
    ids = enc(TEXTS["accented"])[:20]
    lp = make_logprobs(rng_for("lpcomp-misc"), ids, 5)
    C.comp("comp_logprobs_minus1", [gresp([gch(ids, finish="length", logprobs=lp)])],
           completion_request=comp_req(logprobs=-1))
    C.comp("comp_logprobs_10_more_than_given", [gresp([gch(ids, finish="length", logprobs=lp)])],
           completion_request=comp_req(logprobs=10))
    C.comp("comp_logprobs_logprob_token_ids", [gresp([gch(ids, finish="length", logprobs=lp)])],
           completion_request=comp_req(logprobs=1, logprob_token_ids=[3, 4]))
    C.comp("comp_logprobs_return_tokens_as_token_ids", [gresp([gch(ids, finish="length", logprobs=lp)])],
           completion_request=comp_req(logprobs=2, return_tokens_as_token_ids=True),
           note="0.33 derender ignores return_tokens_as_token_ids")
    lpd = make_logprobs(rng_for("lpcomp-distinct"), ids, 5, layout="distinct")
    C.comp("comp_logprobs_distinct_layout", [gresp([gch(ids, finish="length", logprobs=lpd)])],
           completion_request=comp_req(logprobs=3))
    lps = make_logprobs(rng_for("lpcomp-sampledonly"), ids, 0)
    C.comp("comp_logprobs_sampled_only_logprobs0", [gresp([gch(ids, finish="length", logprobs=lps)])],
           completion_request=comp_req(logprobs=0))
    empty_top = {"content": [{"token_id": t, "logprob": -0.5, "rank": 1, "top_logprobs": []}
                             for t in ids]}
    C.comp("comp_logprobs_empty_top_lists", [gresp([gch(ids, finish="length", logprobs=empty_top)])],
           completion_request=comp_req(logprobs=2),
           note="empty candidate list -> top_logprobs entry null")
    mixed_top = {"content": [dict(e) if i % 2 else {**e, "top_logprobs": []}
                             for i, e in enumerate(lp["content"])]}
    C.comp("comp_logprobs_some_empty_top_lists", [gresp([gch(ids, finish="length", logprobs=mixed_top)])],
           completion_request=comp_req(logprobs=2))
    C.comp("comp_logprobs_content_null", [gresp([gch(ids, finish="length", logprobs={"content": None})])],
           completion_request=comp_req(logprobs=2))
    C.comp("comp_logprobs_content_empty", [gresp([gch(ids, finish="length", logprobs={"content": []})])],
           completion_request=comp_req(logprobs=2))
    # duplicate token strings collapse in the completions dict
    dup = {"content": [{"token_id": t, "logprob": -0.5, "rank": 1,
                        "top_logprobs": [{"token_id": t, "logprob": -0.5, "rank": 1},
                                         {"token_id": t, "logprob": -0.5, "rank": 1},
                                         {"token_id": 3, "logprob": -1.5, "rank": 2},
                                         {"token_id": 3, "logprob": -7.0, "rank": 9}]}
                       for t in ids[:5]]}
    C.comp("comp_logprobs_duplicate_candidates", [gresp([gch(ids[:5], finish="length", logprobs=dup)])],
           completion_request=comp_req(logprobs=3))
    C.chat("chat_logprobs_duplicate_candidates", gresp([gch(ids[:5], finish="length", logprobs=dup)]),
           chat_request=chat_req(logprobs=True, top_logprobs=4))
    # text_offset with special tokens / EOS / multibyte
    sids = special_mix()
    lpsx = make_logprobs(rng_for("lpcomp-special"), [*sids, EOS], 1)
    C.comp("comp_logprobs_text_offset_special_eos", [gresp([gch([*sids, EOS], logprobs=lpsx)])],
           completion_request=comp_req(logprobs=1))
    C.comp("comp_logprobs_text_offset_special_keep", [gresp([gch([*sids, EOS], logprobs=lpsx)])],
           completion_request=comp_req(logprobs=1, skip_special_tokens=False))
    eids = enc(TEXTS["emoji"])
    lpm = make_logprobs(rng_for("lpcomp-emoji-offset"), eids, 1)
    C.comp("comp_logprobs_text_offset_multibyte", [gresp([gch(eids, finish="length", logprobs=lpm)])],
           completion_request=comp_req(logprobs=1))
    # stop string truncation does not cut logprobs
    sids2 = enc("alpha beta STOP gamma delta")
    lpst = make_logprobs(rng_for("lpcomp-stop"), sids2, 1)
    C.comp("comp_logprobs_with_stop_string", [gresp([gch(sids2, logprobs=lpst)])],
           completion_request=comp_req(logprobs=1, stop=["STOP"]))
    C.chat("chat_logprobs_with_stop_string", gresp([gch(sids2, logprobs=lpst)]),
           chat_request=chat_req(logprobs=True, top_logprobs=1, stop=["STOP"]))


def add_stops(C: Cases):
    e = enc
    txt = [*e("Hello world. The end is near."), EOS]
    # EOS handling
    C.chat("chat_eos_dropped_default", gresp([gch(txt)]), chat_request=chat_req())
    C.chat("chat_eos_include_stop_str", gresp([gch(txt)]),
           chat_request=chat_req(include_stop_str_in_output=True))
    C.chat("chat_eos_include_stop_str_keep_special", gresp([gch(txt)]),
           chat_request=chat_req(include_stop_str_in_output=True, skip_special_tokens=False))
    C.chat("chat_eos_keep_special_not_included", gresp([gch(txt)]),
           chat_request=chat_req(skip_special_tokens=False))
    C.chat("chat_eos_ignore_eos_keep_special", gresp([gch(txt)]),
           chat_request=chat_req(ignore_eos=True, skip_special_tokens=False))
    C.chat("chat_eos_ignore_eos", gresp([gch(txt)]), chat_request=chat_req(ignore_eos=True))
    C.chat("chat_eos_stop_reason_int_1", gresp([gch(txt, stop_reason=1)]),
           chat_request=chat_req(skip_special_tokens=False))
    C.chat("chat_eos_ignore_eos_stop_reason_int_1", gresp([gch(txt, stop_reason=1)]),
           chat_request=chat_req(ignore_eos=True, skip_special_tokens=False))
    C.comp("comp_eos_dropped_default", [gresp([gch(txt)])], completion_request=comp_req())
    C.comp("comp_eos_include_stop_str_keep_special", [gresp([gch(txt)])],
           completion_request=comp_req(include_stop_str_in_output=True, skip_special_tokens=False))
    C.comp("comp_eos_keep_special", [gresp([gch(txt)])],
           completion_request=comp_req(skip_special_tokens=False))
    C.comp("comp_eos_ignore_eos_keep_special", [gresp([gch(txt)])],
           completion_request=comp_req(ignore_eos=True, skip_special_tokens=False))
    C.comp("comp_eos_no_request_keep", [gresp([gch(txt)])])
    # stop_token_ids
    st = [*e("Question answered"), USER_TOK]
    C.chat("chat_stop_token_ids_match_null_reason", gresp([gch(st)]),
           chat_request=chat_req(stop_token_ids=[USER_TOK], skip_special_tokens=False))
    C.chat("chat_stop_token_ids_match_int_reason", gresp([gch(st, stop_reason=USER_TOK)]),
           chat_request=chat_req(stop_token_ids=[USER_TOK], skip_special_tokens=False))
    C.chat("chat_stop_token_ids_include_stop", gresp([gch(st, stop_reason=USER_TOK)]),
           chat_request=chat_req(stop_token_ids=[USER_TOK], skip_special_tokens=False,
                                 include_stop_str_in_output=True))
    C.chat("chat_stop_reason_int_without_request", gresp([gch(st, stop_reason=USER_TOK)]))
    C.chat("chat_stop_reason_int_mismatch_last", gresp([gch(st, stop_reason=999)]),
           chat_request=chat_req(skip_special_tokens=False))
    C.chat("chat_stop_token_ids_no_match", gresp([gch(e("abc def"))]),
           chat_request=chat_req(stop_token_ids=[USER_TOK]))
    C.chat("chat_stop_token_ids_plain_token", gresp([gch(e("one two three"))]),
           chat_request=chat_req(stop_token_ids=[e(" three")[0]]),
           note="last id is in stop_token_ids, stop_reason null -> reported as int and dropped")
    C.chat("chat_stop_reason_int_finish_length", gresp([gch(st, finish="length", stop_reason=USER_TOK)]),
           chat_request=chat_req(skip_special_tokens=False))
    C.comp("comp_stop_token_ids_match_null_reason", [gresp([gch(st)])],
           completion_request=comp_req(stop_token_ids=[USER_TOK], skip_special_tokens=False))
    C.comp("comp_stop_token_ids_plain_token", [gresp([gch(e("one two three"))])],
           completion_request=comp_req(stop_token_ids=[e(" three")[0]]))
    C.comp("comp_stop_reason_int_include_stop", [gresp([gch(st, stop_reason=USER_TOK)])],
           completion_request=comp_req(include_stop_str_in_output=True, skip_special_tokens=False))
    # stop strings
    s = e("The answer is 42.\n\nNext question: what is 7*6? END of text")
    C.chat("chat_stop_reason_str_truncates", gresp([gch(s, stop_reason="\n\n")]))
    C.chat("chat_stop_reason_str_include", gresp([gch(s, stop_reason="\n\n")]),
           chat_request=chat_req(include_stop_str_in_output=True))
    C.chat("chat_stop_reason_str_not_in_text", gresp([gch(s, stop_reason="ZZZ")]))
    C.chat("chat_stop_reason_str_with_eos_last", gresp([gch([*s, EOS], stop_reason="END")]),
           note="str stop_reason: EOS at end is not dropped by _drop_stop_token")
    C.chat("chat_stop_reason_str_finish_length", gresp([gch(s, finish="length", stop_reason="\n\n")]))
    C.chat("chat_stop_list_from_request", gresp([gch(s)]),
           chat_request=chat_req(stop=["END", "\n\n"]))
    C.chat("chat_stop_str_from_request", gresp([gch(s)]), chat_request=chat_req(stop="question"))
    C.chat("chat_stop_str_from_request_include", gresp([gch(s)]),
           chat_request=chat_req(stop="question", include_stop_str_in_output=True))
    C.chat("chat_stop_list_several_match", gresp([gch(s)]),
           chat_request=chat_req(stop=["7*6", "42", "END"]))
    C.chat("chat_stop_list_empty_strings", gresp([gch(s)]), chat_request=chat_req(stop=["", "END"]))
    C.chat("chat_stop_list_no_match", gresp([gch(s)]), chat_request=chat_req(stop=["nope"]))
    C.chat("chat_stop_request_finish_length_ignored", gresp([gch(s, finish="length")]),
           chat_request=chat_req(stop=["42"]))
    C.chat("chat_stop_reason_str_overrides_request", gresp([gch(s, stop_reason="END")]),
           chat_request=chat_req(stop=["42"]))
    C.chat("chat_stop_reason_int_ignores_request_stop", gresp([gch([*s, EOS], stop_reason=1)]),
           chat_request=chat_req(stop=["42"]))
    span = enc_parts("abc", "de", "fgh", " tail")
    C.chat("chat_stop_spans_token_boundary", gresp([gch(span)]), chat_request=chat_req(stop=["cdef"]))
    C.chat("chat_stop_spans_token_boundary_include", gresp([gch(span)]),
           chat_request=chat_req(stop=["cdef"], include_stop_str_in_output=True))
    C.comp("comp_stop_spans_token_boundary", [gresp([gch(span)])],
           completion_request=comp_req(stop=["cdef"]))
    # min_tokens interaction
    mt = e("STOP early then more words and STOP again at the end")
    for m in (0, 1, 2, 3, 5, 50):
        C.chat(f"chat_stop_min_tokens_{m}", gresp([gch(mt)]),
               chat_request=chat_req(stop=["STOP"], min_tokens=m))
    C.comp("comp_stop_min_tokens_3", [gresp([gch(mt)])],
           completion_request=comp_req(stop=["STOP"], min_tokens=3))
    C.chat("chat_stop_only_in_min_tokens", gresp([gch(e("STOP here only, nothing after"))]),
           chat_request=chat_req(stop=["STOP"], min_tokens=4))
    C.chat("chat_stop_reason_str_in_min_tokens", gresp([gch(mt, stop_reason="STOP")]),
           chat_request=chat_req(min_tokens=3))
    C.chat("chat_stop_min_tokens_eos", gresp([gch([*e("tiny"), EOS])]),
           chat_request=chat_req(min_tokens=5))
    # multibyte / special stops
    zh = e(TEXTS["chinese"])
    C.chat("chat_stop_cjk", gresp([gch(zh)]), chat_request=chat_req(stop=["，"]))
    C.chat("chat_stop_emoji", gresp([gch(e(TEXTS["emoji"]))]), chat_request=chat_req(stop=["🇫🇷"]))
    C.comp("comp_stop_emoji_include", [gresp([gch(e(TEXTS["emoji"]))])],
           completion_request=comp_req(stop=["🇫🇷"], include_stop_str_in_output=True))
    C.chat("chat_stop_special_token_text", gresp([gch(special_mix())]),
           chat_request=chat_req(stop=["<｜User｜>"], skip_special_tokens=False))
    C.chat("chat_stop_at_very_end", gresp([gch(e("finish here STOP"))]), chat_request=chat_req(stop=["STOP"]))
    C.chat("chat_stop_at_very_start", gresp([gch(e("STOP at start"))]), chat_request=chat_req(stop=["STOP"]))
    C.comp("comp_stop_reason_str", [gresp([gch(s, stop_reason="\n\n")])])
    C.comp("comp_stop_list_from_request", [gresp([gch(s)])], completion_request=comp_req(stop=["END", "\n\n"]))
    C.comp("comp_stop_str_from_request_include", [gresp([gch(s)])],
           completion_request=comp_req(stop="question", include_stop_str_in_output=True))
    C.comp("comp_stop_min_tokens_only_in_min", [gresp([gch(e("STOP here only, nothing after"))])],
           completion_request=comp_req(stop=["STOP"], min_tokens=4))


def add_return_ids_and_prompt(C: Cases):
    e = enc
    p = e(PROMPT_TEXT)
    out = [*e(" Thank you, that is very kind."), EOS]
    C.chat("chat_return_token_ids", gresp([gch(out)], prompt_token_ids=p),
           chat_request=chat_req(return_token_ids=True))
    C.chat("chat_return_token_ids_no_prompt_ids", gresp([gch(out)]),
           chat_request=chat_req(return_token_ids=True))
    C.chat("chat_return_token_ids_false", gresp([gch(out)], prompt_token_ids=p),
           chat_request=chat_req(return_token_ids=False))
    C.chat("chat_return_token_ids_top_level_prompt_only", gresp([gch(out)]),
           chat_request=chat_req(return_token_ids=True), prompt_token_ids=p,
           note="response prompt_token_ids comes from generate_response only")
    C.comp("comp_return_token_ids", [gresp([gch(out)], prompt_token_ids=p)],
           completion_request=comp_req(return_token_ids=True))
    C.comp("comp_return_token_ids_top_level_prompt", [gresp([gch(out)])],
           completion_request=comp_req(return_token_ids=True), prompt_token_ids=[p])
    # prompt seeding
    for key in ("english", "chinese"):
        o = [*e(TEXTS[key])[:20], EOS]
        C.chat(f"chat_prompt_ids_top_level_{key}", gresp([gch(o)]), prompt_token_ids=p)
        C.chat(f"chat_prompt_ids_in_generate_{key}", gresp([gch(o)], prompt_token_ids=p))
        C.chat(f"chat_prompt_ids_absent_{key}", gresp([gch(o)]))
        C.comp(f"comp_prompt_ids_top_level_{key}", [gresp([gch(o)])], prompt_token_ids=[p])
        C.comp(f"comp_prompt_ids_in_generate_{key}", [gresp([gch(o)], prompt_token_ids=p)])
    o = e(" continued")
    C.chat("chat_prompt_ids_both_differ", gresp([gch([*o, EOS])], prompt_token_ids=e("other prompt")),
           prompt_token_ids=p, chat_request=chat_req(return_token_ids=True))
    C.chat("chat_prompt_ids_empty_list", gresp([gch([*o, EOS])]), prompt_token_ids=[])
    C.chat("chat_prompt_ids_special_tail", gresp([gch([*o, EOS])]),
           prompt_token_ids=[BOS, USER_TOK, *e("hi"), ASSISTANT_TOK])
    C.chat("chat_prompt_ids_special_tail_keep", gresp([gch([*o, EOS])]),
           prompt_token_ids=[BOS, USER_TOK, *e("hi"), ASSISTANT_TOK],
           chat_request=chat_req(skip_special_tokens=False))
    # prompt ending in the middle of a multi-byte character, output completes it
    emo = e("🤖🔥")
    for cut in range(1, len(emo)):
        if dec(emo[:cut]).endswith("\ufffd"):
            C.chat(f"chat_prompt_ends_mid_char_{cut}", gresp([gch([*emo[cut:], EOS])]),
                   prompt_token_ids=emo[:cut])
            C.comp(f"comp_prompt_ends_mid_char_{cut}", [gresp([gch([*emo[cut:], EOS])])],
                   prompt_token_ids=[emo[:cut]])
            break
    C.comp("comp_prompt_ids_list_with_null", [gresp([gch([*o, EOS])], rid="a", prompt_token_ids=p),
                                              gresp([gch([*o, EOS])], rid="b")],
           prompt_token_ids=[None, e("zzz")])
    # prompt_tokens / usage
    C.chat("chat_prompt_tokens_given", gresp([gch(out)]), prompt_tokens=17)
    C.chat("chat_prompt_tokens_zero", gresp([gch(out)]), prompt_tokens=0)
    C.chat("chat_prompt_tokens_negative", gresp([gch(out)]), prompt_tokens=-5)
    C.chat("chat_prompt_tokens_null", gresp([gch(out)]), prompt_tokens=None)
    C.chat("chat_usage_in_generate_ignored",
           gresp([gch(out)], usage={"prompt_tokens": 99, "completion_tokens": 3, "total_tokens": 102}))
    C.comp("comp_prompt_tokens_given", [gresp([gch(out)], rid="a"), gresp([gch(out)], rid="b")],
           prompt_tokens=[7, 11])
    C.comp("comp_prompt_tokens_absent", [gresp([gch(out)], rid="a"), gresp([gch(out)], rid="b")])


def add_multi(C: Cases):
    e = enc
    c1 = gch([*e("First answer."), EOS], index=0)
    c2 = gch([*e("Second answer, longer."), EOS], index=1)
    c3 = gch(e("Third was cut"), index=2, finish="length")
    C.chat("chat_three_choices", gresp([c1, c2, c3]), prompt_tokens=4)
    C.chat("chat_choices_out_of_order_indexes", gresp([
        gch(e("five"), index=5, finish="length"), gch([*e("two"), EOS], index=2),
        gch([*e("two again"), EOS], index=2)]))
    lp1 = make_logprobs(rng_for("multi-lp1"), [*e("First answer."), EOS], 3)
    lp2 = make_logprobs(rng_for("multi-lp2"), [*e("Second answer, longer."), EOS], 3)
    C.chat("chat_two_choices_logprobs", gresp([
        gch([*e("First answer."), EOS], index=0, logprobs=lp1),
        gch([*e("Second answer, longer."), EOS], index=1, logprobs=lp2)]),
        chat_request=chat_req(logprobs=True, top_logprobs=2, n=2, return_token_ids=True))
    C.chat("chat_two_choices_one_logprobs", gresp([
        gch([*e("First answer."), EOS], index=0, logprobs=lp1),
        gch([*e("Second answer, longer."), EOS], index=1)]),
        chat_request=chat_req(logprobs=True, top_logprobs=2))
    C.chat("chat_choices_empty_list", gresp([]))
    C.comp("comp_two_responses_two_choices", [
        gresp([gch([*e("A0"), EOS], 0), gch(e("A1"), 1, finish="length")], rid="req-a",
              prompt_token_ids=e("prompt a")),
        gresp([gch([*e("B0"), EOS], 0), gch([*e("B1"), EOS], 1)], rid="req-b",
              prompt_token_ids=e("prompt b"))],
        completion_request=comp_req(prompt=["prompt a", "prompt b"], n=2, return_token_ids=True),
        prompt_tokens=[2, 2])
    C.comp("comp_three_responses_mixed_choices", [
        gresp([gch([*e("x"), EOS], 3)], rid="r1"),
        gresp([gch(e("y"), 0, finish="length"), gch([*e("yy"), EOS], 1), gch([*e("yyy"), EOS], 2)], rid="r2"),
        gresp([gch([*e("z"), EOS], 7)], rid="r3")])
    C.comp("comp_response_with_no_choices", [gresp([], rid="empty"), gresp([gch([*e("q"), EOS])], rid="q")])
    C.comp("comp_two_responses_logprobs", [
        gresp([gch([*e("First answer."), EOS], logprobs=lp1)], rid="l1"),
        gresp([gch([*e("Second answer, longer."), EOS], logprobs=lp2)], rid="l2")],
        completion_request=comp_req(logprobs=1))


def add_passthrough(C: Cases):
    e = enc
    out = [*e("Pass it through."), EOS]
    kv = {"do_remote_prefill": True, "remote_block_ids": [1, 2, 3], "remote_host": "10.0.0.1",
          "nested": {"a": [1, {"b": None}]}}
    metrics = {"time_to_first_token_ms": 12.5, "generation_time_ms": 100.0, "queue_time_ms": 0.5,
               "mean_itl_ms": 3.25, "tokens_per_second": 250.0}
    plp = [None, {"1234": {"logprob": -1.5, "rank": 3, "decoded_token": "foo"},
                  "5": {"logprob": -0.25, "rank": 1, "decoded_token": None}},
           {"42": {"logprob": -9999.0, "rank": None}}]
    full = gresp([gch(out)], rid="pt-1", kv_transfer_params=kv, metrics=metrics, prompt_logprobs=plp,
                 prompt_token_ids=e("hello"), model="ignored-model", created=1234,
                 usage={"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
                 ec_transfer_params={"ec": 1}, mm_placeholders=None, prompt_token_id_logprobs=None)
    C.chat("chat_passthrough_kv_metrics_prompt_logprobs", full)
    C.chat("chat_passthrough_with_return_token_ids", full, chat_request=chat_req(return_token_ids=True))
    C.comp("comp_passthrough_single_response", [full])
    C.comp("comp_passthrough_two_responses_same_kv", [
        gresp([gch(out)], rid="a", kv_transfer_params=kv, metrics=metrics),
        gresp([gch(out)], rid="b", kv_transfer_params=kv, metrics=metrics)])
    C.comp("comp_passthrough_two_responses_diff_kv", [
        gresp([gch(out)], rid="a", kv_transfer_params=kv),
        gresp([gch(out)], rid="b", kv_transfer_params={"other": 1})])
    C.comp("comp_passthrough_prompt_logprobs_ignored", [gresp([gch(out)], rid="a", prompt_logprobs=plp)])
    C.chat("chat_metrics_speculative", gresp([gch(out)], metrics={
        "time_to_first_token_ms": None,
        "speculative_decoding": {"mean_acceptance_length": 2.5, "draft_acceptance_rate": 0.75,
                                 "acceptance_histogram": [1, 2, 3], "num_spec_steps": 6,
                                 "num_accepted_draft_tokens": 8, "num_draft_tokens": 12,
                                 "num_spec_tokens": 2}}))
    C.chat("err_chat_metrics_speculative_wrong_fields", gresp([gch(out)], metrics={
        "speculative_decoding": {"num_drafts": 3}}))
    C.chat("chat_metrics_unknown_field", gresp([gch(out)], metrics={"mean_itl_ms": 1.0, "bogus": 5}))
    C.chat("chat_prompt_logprobs_int_keys", gresp([gch(out)], prompt_logprobs=[
        {"7": {"logprob": -0.5}}, None]))
    # model omitted vs given
    C.chat("chat_model_given", gresp([gch(out)]), model=MODEL_NAME)
    C.chat("chat_model_null", gresp([gch(out)]), model=None)
    C.comp("comp_model_given", [gresp([gch(out)])], model=MODEL_NAME)
    C.chat("chat_model_in_chat_request_differs", gresp([gch(out)]),
           chat_request={"messages": MSGS, "model": "something-else"})
    C.comp("comp_model_in_completion_request_differs", [gresp([gch(out)])],
           completion_request=comp_req(model="something-else"))
    C.chat("chat_stream_false_explicit", gresp([gch(out)]), stream=False)
    C.comp("comp_stream_false_explicit", [gresp([gch(out)])], stream=False)
    # request_id omitted: vLLM generates a random uuid
    C.chat("chat_request_id_omitted", gresp([gch(out)], rid=None),
           note="id is a random uuid; normalise")
    C.comp("comp_request_id_omitted", [gresp([gch(out)], rid=None)],
           note="id is a random uuid; normalise")
    C.chat("chat_request_id_empty", gresp([gch(out)], rid=""))
    C.chat("chat_request_id_unicode", gresp([gch(out)], rid="请求-🚀-1"))
    # unknown / extra fields
    C.chat("chat_extra_top_level_field", gresp([gch(out)]), unknown_field=123)
    C.chat("chat_extra_choice_fields", gresp([gch(out, routed_experts="AAAA", sampling_mask=[[1, 2]],
                                                   weight_versions=[{"version": "v3", "start": 0, "end": 2}],
                                                   bogus="x")]))
    C.chat("chat_extra_chat_request_field", gresp([gch(out)]),
           chat_request={"messages": MSGS, "totally_unknown": True})
    C.chat("chat_output_mode_tokens_explicit", gresp([gch(out)], output_mode="tokens"))
    C.chat("chat_chat_request_full", gresp([gch(out)]), chat_request={
        "messages": [{"role": "system", "content": "be nice"}, {"role": "user", "content": "hi"},
                     {"role": "assistant", "content": "hello"}, {"role": "user", "content": "again"}],
        "model": MODEL_NAME, "temperature": 0.7, "top_p": 0.9, "max_tokens": 64, "n": 1, "seed": 1,
        "frequency_penalty": 0.1, "presence_penalty": 0.1, "user": "u1"})


def add_long(C: Cases):
    base = enc(TEXTS["english"] + " " + TEXTS["chinese"] + " " + TEXTS["emoji"] + "\n")
    r = rng_for("long")
    ids_4096 = [*(base * (4096 // len(base) + 1))[:4095], EOS]
    C.chat("chat_long_4096_tokens_at_limit", gresp([gch(ids_4096)]), prompt_tokens=10)
    ids_2000 = (base * (2000 // len(base) + 1))[:2000]
    lp = make_logprobs(r, ids_2000, 5)
    C.chat("chat_long_2000_tokens_top5", gresp([gch(ids_2000, finish="length", logprobs=lp)]),
           chat_request=chat_req(logprobs=True, top_logprobs=5))
    ids_1500 = (base * (1500 // len(base) + 1))[:1500]
    lp2 = make_logprobs(r, ids_1500, 5)
    C.comp("comp_long_1500_tokens_logprobs5", [gresp([gch(ids_1500, finish="length", logprobs=lp2)])],
           completion_request=comp_req(logprobs=5))
    rnd = [r.randrange(3, 128000) for _ in range(3000)]
    C.comp("comp_long_3000_random_ids", [gresp([gch(rnd, finish="length")])])


def json_err_cases(C: Cases, path: str, tag: str):
    for name, raw in [
        ("truncated", '{"generate_response": {"request_id": "x", "choices": [{"index": 0, "token_ids": [1'),
        ("trailing_comma", '{"generate_responses": [], }'),
        ("empty_body", ""),
        ("null", "null"),
        ("array", "[]"),
        ("string", '"hello"'),
        ("number", "42"),
        ("single_quotes", "{'generate_response': {}}"),
        ("garbage", "this is not json"),
        ("two_objects", '{"a": 1}{"b": 2}'),
    ]:
        C.add(f"{tag}_malformed_json_{name}", path, raw=raw)
    C.add(f"{tag}_malformed_invalid_utf8", path, raw_bytes=b'{"generate_response": "\xff\xfe"}')
    C.add(f"{tag}_wrong_content_type", path, raw='{"generate_response": {"choices": []}}',
          headers={"Content-Type": "text/plain"})


def add_errors(C: Cases):
    e = enc
    ok = [*e("fine"), EOS]
    # model
    C.chat("err_chat_unknown_model", gresp([gch(ok)]), model="no-such-model")
    C.comp("err_comp_unknown_model", [gresp([gch(ok)])], model="no-such-model")
    C.chat("chat_model_empty_string", gresp([gch(ok)]), model="")
    # token_ids empty / null / missing
    C.chat("err_chat_token_ids_empty", gresp([gch([])]))
    C.chat("err_chat_token_ids_null", gresp([gch(None)]))
    C.chat("err_chat_token_ids_missing", gresp([gch(MISSING)]))
    C.chat("err_chat_second_choice_empty", gresp([gch(ok), gch([], index=1)]))
    C.comp("err_comp_token_ids_empty", [gresp([gch([])])])
    C.comp("err_comp_token_ids_null", [gresp([gch(None)])])
    C.comp("err_comp_token_ids_missing", [gresp([gch(MISSING)])])
    # negative ids
    C.chat("err_chat_token_ids_negative", gresp([gch([5, -1, 6])]))
    C.comp("err_comp_token_ids_negative", [gresp([gch([-3])])])
    C.chat("err_chat_prompt_token_ids_negative_top", gresp([gch(ok)]), prompt_token_ids=[1, -2])
    C.chat("err_chat_prompt_token_ids_negative_in_generate", gresp([gch(ok)], prompt_token_ids=[-7]))
    C.comp("err_comp_prompt_token_ids_negative", [gresp([gch(ok)])], prompt_token_ids=[[-1]])
    neg_lp = {"content": [{"token_id": -5, "logprob": -0.1, "rank": 1, "top_logprobs": []}]}
    C.chat("err_chat_logprob_token_id_negative", gresp([gch(e("a"), finish="length", logprobs=neg_lp)]),
           chat_request=chat_req(logprobs=True, top_logprobs=1))
    neg_top = {"content": [{"token_id": 64, "logprob": -0.1, "rank": 1,
                            "top_logprobs": [{"token_id": 64, "logprob": -0.1}, {"token_id": -9, "logprob": -1.0}]}]}
    C.chat("err_chat_top_logprob_token_id_negative", gresp([gch([64], finish="length", logprobs=neg_top)]),
           chat_request=chat_req(logprobs=True, top_logprobs=2))
    C.comp("err_comp_top_logprob_token_id_negative", [gresp([gch([64], finish="length", logprobs=neg_top)])],
           completion_request=comp_req(logprobs=1))
    # ids >= vocab size
    for v in (VOCAB_SIZE, VOCAB_SIZE + 1, 200000, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**64):
        C.chat(f"chat_token_id_out_of_vocab_{v}", gresp([gch([*e("ok "), v, *e(" end")], finish="length")]))
    C.chat("chat_token_id_out_of_vocab_keep_special",
           gresp([gch([*e("ok "), VOCAB_SIZE, *e(" end")], finish="length")]),
           chat_request=chat_req(skip_special_tokens=False))
    C.comp("comp_token_id_out_of_vocab", [gresp([gch([*e("ok "), VOCAB_SIZE, 150000, *e(" end")], finish="length")])])
    C.comp("comp_token_id_out_of_vocab_2_63", [gresp([gch([2**63 - 1], finish="length")])])
    C.chat("chat_only_out_of_vocab", gresp([gch([VOCAB_SIZE + 5], finish="length")]))
    oov_lp = {"content": [{"token_id": VOCAB_SIZE + 7, "logprob": -0.1, "rank": 1,
                           "top_logprobs": [{"token_id": VOCAB_SIZE + 7, "logprob": -0.1, "rank": 1},
                                            {"token_id": 300000, "logprob": -2.0, "rank": 2}]}]}
    C.chat("chat_logprob_token_id_out_of_vocab", gresp([gch([VOCAB_SIZE + 7], finish="length", logprobs=oov_lp)]),
           chat_request=chat_req(logprobs=True, top_logprobs=2))
    C.comp("comp_logprob_token_id_out_of_vocab", [gresp([gch([VOCAB_SIZE + 7], finish="length", logprobs=oov_lp)])],
           completion_request=comp_req(logprobs=1))
    C.chat("chat_prompt_token_id_out_of_vocab", gresp([gch(ok)]), prompt_token_ids=[VOCAB_SIZE, 3])
    # bounds: max_model_len
    C.chat("err_chat_token_ids_over_max_model_len", gresp([gch([3] * (MAX_MODEL_LEN + 1), finish="length")]))
    C.comp("err_comp_token_ids_over_max_model_len", [gresp([gch([3] * (MAX_MODEL_LEN + 1), finish="length")])])
    C.chat("chat_token_ids_exactly_max_model_len", gresp([gch([3] * MAX_MODEL_LEN, finish="length")]))
    lpc = {"content": [{"token_id": 3, "logprob": -0.1} for _ in range(MAX_MODEL_LEN + 1)]}
    C.chat("err_chat_logprobs_content_over_max_model_len", gresp([gch([3] * 10, finish="length", logprobs=lpc)]))
    C.comp("err_comp_logprobs_content_over_max_model_len", [gresp([gch([3] * 10, finish="length", logprobs=lpc)])])
    C.chat("err_chat_prompt_token_ids_over_max_model_len", gresp([gch(ok)]),
           prompt_token_ids=[3] * (MAX_MODEL_LEN + 1))
    C.comp("err_comp_prompt_token_ids_over_max_model_len", [gresp([gch(ok)])],
           prompt_token_ids=[[3] * (MAX_MODEL_LEN + 1)])
    C.chat("chat_generate_prompt_token_ids_over_max_model_len",
           gresp([gch(ok)], prompt_token_ids=[3] * (MAX_MODEL_LEN + 1)),
           note="generate_response.prompt_token_ids is not bounded")
    C.chat("err_chat_prompt_logprobs_over_max_model_len",
           gresp([gch(ok)], prompt_logprobs=[None] * (MAX_MODEL_LEN + 1)))
    C.comp("err_comp_prompt_logprobs_over_max_model_len",
           [gresp([gch(ok)], prompt_logprobs=[None] * (MAX_MODEL_LEN + 1))])
    C.chat("err_chat_second_choice_over_max_model_len", gresp([gch(ok), gch([3] * (MAX_MODEL_LEN + 1), index=1)]))
    # bounds: max_logprobs
    def toplp(n):
        return {"content": [{"token_id": 3, "logprob": -0.1, "rank": 1,
                             "top_logprobs": [{"token_id": 3 + j, "logprob": -0.1 - j, "rank": j + 1}
                                              for j in range(n)]}]}
    C.chat("err_chat_top_logprobs_21_entries", gresp([gch([3], finish="length", logprobs=toplp(21))]),
           chat_request=chat_req(logprobs=True, top_logprobs=20))
    C.chat("err_chat_top_logprobs_21_entries_no_request", gresp([gch([3], finish="length", logprobs=toplp(21))]))
    C.chat("chat_top_logprobs_20_entries_ok", gresp([gch([3], finish="length", logprobs=toplp(20))]),
           chat_request=chat_req(logprobs=True, top_logprobs=20))
    C.comp("err_comp_top_logprobs_21_entries", [gresp([gch([3], finish="length", logprobs=toplp(21))])],
           completion_request=comp_req(logprobs=5))
    C.comp("comp_top_logprobs_20_entries_ok", [gresp([gch([3], finish="length", logprobs=toplp(20))])])
    # bounds: VLLM_MAX_N_SEQUENCES (16384)
    C.chat("err_chat_choices_over_max_n", gresp([gch([3], index=i) for i in range(MAX_N_SEQUENCES + 1)]))
    C.comp("err_comp_generate_responses_over_max_n",
           [{"request_id": "r", "choices": []} for _ in range(MAX_N_SEQUENCES + 1)])
    # completion list length mismatches
    two = [gresp([gch(ok)], rid="a"), gresp([gch(ok)], rid="b")]
    C.comp("err_comp_prompt_tokens_length_mismatch", two, prompt_tokens=[1])
    C.comp("err_comp_prompt_tokens_too_long", two, prompt_tokens=[1, 2, 3])
    C.comp("err_comp_prompt_token_ids_length_mismatch", two, prompt_token_ids=[[1]])
    C.comp("err_comp_prompt_tokens_empty_list", two, prompt_tokens=[])
    C.comp("err_comp_generate_responses_empty", [])
    C.comp("err_comp_generate_responses_empty_with_prompt_tokens", [], prompt_tokens=[])
    C.add("err_comp_generate_responses_null", COMP, {"generate_responses": None})
    C.add("err_comp_generate_responses_missing", COMP, {"completion_request": comp_req()})
    C.add("err_chat_generate_response_missing", CHAT, {"chat_request": chat_req()})
    C.add("err_chat_generate_response_null", CHAT, {"generate_response": None})
    C.add("err_chat_generate_response_list", CHAT, {"generate_response": [gresp([gch(ok)])]})
    C.add("err_chat_empty_object", CHAT, {})
    C.add("err_comp_empty_object", COMP, {})
    C.add("err_chat_choices_missing", CHAT, {"generate_response": {"request_id": "x"}})
    C.add("err_chat_index_missing", CHAT, {"generate_response": {"request_id": "x", "choices": [{"token_ids": ok}]}})
    C.add("err_comp_sent_to_chat", CHAT, {"generate_responses": [gresp([gch(ok)])]})
    C.add("err_chat_sent_to_comp", COMP, {"generate_response": gresp([gch(ok)])})
    # wrong types
    C.chat("err_chat_token_ids_string", gresp([gch("1 2 3")]))
    C.chat("chat_token_ids_numeric_strings", gresp([gch(["100", "200"], finish="length")]),
           note="pydantic lax mode: numeric strings")
    C.chat("chat_token_ids_integral_floats", gresp([gch([100.0, 200.0], finish="length")]))
    C.chat("err_chat_token_ids_fractional_float", gresp([gch([100.5], finish="length")]))
    C.chat("chat_token_ids_bool", gresp([gch([True, False], finish="length")]))
    C.chat("err_chat_token_ids_nested", gresp([gch([[1, 2]], finish="length")]))
    C.chat("err_chat_token_ids_null_element", gresp([gch([5, None], finish="length")]))
    C.chat("err_chat_index_string", gresp([gch(ok, index="zero")]))
    C.chat("chat_index_numeric_string", gresp([gch(ok, index="3")]))
    C.chat("err_chat_index_null", gresp([gch(ok, index=None)]))
    C.chat("chat_index_negative", gresp([gch(ok, index=-1)]))
    C.chat("err_chat_finish_reason_int", gresp([gch(ok, finish=5)]))
    C.chat("err_chat_stop_reason_float", gresp([gch(ok, stop_reason=1.5)]))
    C.chat("chat_stop_reason_bool", gresp([gch(ok, stop_reason=True)]))
    C.chat("err_chat_stop_reason_list", gresp([gch(ok, stop_reason=["a"])]))
    C.chat("err_chat_logprob_string",
           gresp([gch([64], finish="length", logprobs={"content": [{"token_id": 64, "logprob": "high"}]})]))
    C.chat("chat_logprob_numeric_string",
           gresp([gch([64], finish="length", logprobs={"content": [{"token_id": 64, "logprob": "-0.5"}]})]),
           chat_request=chat_req(logprobs=True))
    C.chat("err_chat_logprob_missing", gresp([gch([64], finish="length", logprobs={"content": [{"token_id": 64}]})]))
    C.chat("err_chat_logprob_token_id_missing",
           gresp([gch([64], finish="length", logprobs={"content": [{"logprob": -1.0}]})]))
    C.chat("err_chat_logprobs_content_dict", gresp([gch([64], finish="length", logprobs={"content": {"64": -1.0}})]))
    C.chat("err_chat_logprobs_list", gresp([gch([64], finish="length", logprobs=[{"token_id": 64, "logprob": -1.0}])]))
    C.chat("err_chat_choices_not_list", gresp({"index": 0, "token_ids": ok}))
    C.chat("err_chat_prompt_tokens_string", gresp([gch(ok)]), prompt_tokens="ten")
    C.chat("err_chat_prompt_tokens_float", gresp([gch(ok)]), prompt_tokens=1.5)
    C.chat("err_chat_prompt_token_ids_string", gresp([gch(ok)]), prompt_token_ids="1,2")
    C.chat("err_chat_model_int", gresp([gch(ok)]), model=5)
    C.chat("err_chat_request_id_int", gresp([gch(ok)], rid=123))
    C.chat("err_chat_kv_transfer_params_list", gresp([gch(ok)], kv_transfer_params=[1]))
    C.comp("err_comp_prompt_tokens_not_list", [gresp([gch(ok)])], prompt_tokens=5)
    C.comp("err_comp_prompt_token_ids_flat", [gresp([gch(ok)])], prompt_token_ids=[1, 2])
    C.comp("err_comp_generate_responses_object", gresp([gch(ok)]))
    # output_mode other than tokens
    C.chat("err_chat_output_mode_text", gresp([gch(ok, text="fine")], output_mode="text"))
    C.chat("err_chat_output_mode_derender", gresp([gch(ok)], output_mode="derender"))
    C.chat("err_chat_output_mode_bogus", gresp([gch(ok)], output_mode="bogus"))
    C.comp("err_comp_output_mode_text", [gresp([gch(ok, text="fine")], output_mode="text")])
    # stream discriminator
    C.chat("err_chat_stream_true_with_batch_body", gresp([gch(ok)]), stream=True)
    C.comp("err_comp_stream_true_with_batch_body", [gresp([gch(ok)])], stream=True)
    C.chat("err_chat_stream_string", gresp([gch(ok)]), stream="no")
    # invalid chat_request / completion_request
    C.chat("err_chat_request_missing_messages", gresp([gch(ok)]), chat_request={"model": MODEL_NAME})
    C.chat("chat_request_empty_messages", gresp([gch(ok)]), chat_request={"messages": []})
    C.chat("err_chat_request_null_messages", gresp([gch(ok)]), chat_request={"messages": None})
    C.chat("err_chat_request_top_logprobs_without_logprobs", gresp([gch(ok)]),
           chat_request=chat_req(top_logprobs=5))
    C.chat("err_chat_request_top_logprobs_negative", gresp([gch(ok)]),
           chat_request=chat_req(logprobs=True, top_logprobs=-2))
    C.chat("err_chat_request_top_logprobs_string", gresp([gch(ok)]),
           chat_request=chat_req(logprobs=True, top_logprobs="5"))
    C.chat("err_chat_request_logprob_token_ids_without_logprobs", gresp([gch(ok)]),
           chat_request=chat_req(logprob_token_ids=[1]))
    C.chat("err_chat_request_tool_choice_without_tools", gresp([gch(ok)]),
           chat_request=chat_req(tool_choice="required"))
    C.chat("err_chat_request_tools_empty", gresp([gch(ok)]), chat_request=chat_req(tools=[]))
    C.chat("err_chat_request_named_tool_not_in_tools", gresp([gch(ok)]),
           chat_request=chat_req(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}))
    C.chat("err_chat_request_stream_options_without_stream", gresp([gch(ok)]),
           chat_request=chat_req(stream_options={"include_usage": True}))
    C.chat("err_chat_request_not_object", gresp([gch(ok)]), chat_request="hi")
    C.chat("chat_request_null", gresp([gch(ok)]), chat_request=None)
    C.chat("chat_request_stream_true", gresp([gch(ok)]), chat_request=chat_req(stream=True),
           note="chat_request.stream is ignored by batch derender")
    C.chat("chat_request_bad_message_role", gresp([gch(ok)]),
           chat_request={"messages": [{"role": "wizard", "content": "hi"}]})
    C.comp("err_comp_request_missing_prompt", [gresp([gch(ok)])], completion_request={"model": MODEL_NAME})
    C.comp("err_comp_request_empty_prompt", [gresp([gch(ok)])], completion_request={"prompt": ""})
    C.comp("comp_request_prompt_token_list", [gresp([gch(ok)])], completion_request={"prompt": [1, 2, 3]})
    C.comp("err_comp_request_logprobs_negative", [gresp([gch(ok)])], completion_request=comp_req(logprobs=-2))
    C.comp("err_comp_request_logprobs_string", [gresp([gch(ok)])], completion_request=comp_req(logprobs="5"))
    C.comp("comp_request_logprobs_bool", [gresp([gch(ok)])], completion_request=comp_req(logprobs=True))
    C.comp("err_comp_request_logprob_token_ids_without_logprobs", [gresp([gch(ok)])],
           completion_request=comp_req(logprob_token_ids=[1]))
    C.comp("comp_request_null", [gresp([gch(ok)])], completion_request=None)
    # NaN / Infinity logprobs (written as NaN / Infinity / -Infinity literals)
    ids = e("nan test")
    def lp_with(val, where):
        c = []
        for i, t in enumerate(ids):
            sv = val if (where == "sampled" and i == 0) else -0.5
            tops = [{"token_id": t, "logprob": sv, "rank": 1},
                    {"token_id": 3, "logprob": val if where == "top" and i == 0 else -2.0, "rank": 2}]
            c.append({"token_id": t, "logprob": sv, "rank": 1, "top_logprobs": tops})
        return {"content": c}
    for vname, val in (("neg_inf", -math.inf), ("pos_inf", math.inf), ("nan", math.nan)):
        for where in ("sampled", "top"):
            C.chat(f"chat_logprob_{vname}_{where}", gresp([gch(ids, finish="length", logprobs=lp_with(val, where))]),
                   chat_request=chat_req(logprobs=True, top_logprobs=2))
            C.comp(f"comp_logprob_{vname}_{where}", [gresp([gch(ids, finish="length", logprobs=lp_with(val, where))])],
                   completion_request=comp_req(logprobs=1))
    C.chat("chat_logprob_neg_inf_top_cut_away", gresp([gch(ids, finish="length", logprobs=lp_with(-math.inf, "top"))]),
           chat_request=chat_req(logprobs=True, top_logprobs=1),
           note="-Infinity only in a candidate that top_logprobs=1 cuts")
    C.comp("comp_logprob_neg_inf_top_cut_away",
           [gresp([gch(ids, finish="length", logprobs=lp_with(-math.inf, "top"))])],
           completion_request=comp_req(logprobs=0))
    C.chat("chat_logprob_neg_inf_no_request",
           gresp([gch(ids, finish="length", logprobs=lp_with(-math.inf, "sampled"))]))
    C.chat("chat_prompt_logprobs_neg_inf",
           gresp([gch(ok)], prompt_logprobs=[None, {"5": {"logprob": -math.inf, "rank": 2}}]))
    C.chat("chat_metrics_nan", gresp([gch(ok)], metrics={"mean_itl_ms": math.nan}))
    C.add("chat_logprob_nan_lowercase_literal", CHAT,
          raw='{"generate_response": {"request_id": "x", "choices": [{"index": 0, "token_ids": [64], '
              '"finish_reason": "length", "logprobs": {"content": [{"token_id": 64, "logprob": nan}]}}]}}')
    C.add("chat_logprob_huge_exponent", CHAT,
          raw='{"generate_response": {"request_id": "x", "choices": [{"index": 0, "token_ids": [64], '
              '"finish_reason": "length", "logprobs": {"content": [{"token_id": 64, "logprob": -1e999}]}}]}}',
          note="-1e999 overflows to -inf in the JSON parser")
    # old placeholder-string logprob form (pre-0.33 generate wire format)
    old = {"content": [{"token": f"token_id:{t}", "logprob": -0.5, "bytes": None,
                        "top_logprobs": [{"token": f"token_id:{t}", "logprob": -0.5, "bytes": None},
                                         {"token": "token_id:3", "logprob": -1.5, "bytes": None}]}
                       for t in ids]}
    C.chat("err_chat_old_placeholder_logprobs", gresp([gch(ids, finish="length", logprobs=old)]),
           chat_request=chat_req(logprobs=True, top_logprobs=2))
    C.comp("err_comp_old_placeholder_logprobs", [gresp([gch(ids, finish="length", logprobs=old)])],
           completion_request=comp_req(logprobs=1))
    old_mixed = {"content": [{"token": f"token_id:{ids[0]}", "token_id": ids[0], "logprob": -0.5,
                              "bytes": None, "top_logprobs": []}]}
    C.chat("chat_old_placeholder_plus_token_id", gresp([gch(ids[:1], finish="length", logprobs=old_mixed)]),
           chat_request=chat_req(logprobs=True, top_logprobs=2),
           note="extra 'token'/'bytes' keys are ignored when token_id is present")
    json_err_cases(C, CHAT, "err_chat")
    json_err_cases(C, COMP, "err_comp")


# --------------------------------------------------------------------------
# Parser cases
# --------------------------------------------------------------------------

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the weather for a city",
        "parameters": {"type": "object", "properties": {
            "location": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer"}}, "required": ["location"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Web search",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"}, "filters": {"type": "object"}, "limit": {"type": "integer"},
            "safe": {"type": "boolean"}}}}},
]
NAMED_WEATHER = {"type": "function", "function": {"name": "get_weather"}}


def add_parser_shared(C: Cases, p: str):
    """Decode / logprob / stop cases that behave differently once a parser is
    configured (special tokens are preserved for the parser)."""
    e = enc
    for key in ("english", "chinese", "emoji", "python", "whitespace", "fffd"):
        ids = e(TEXTS[key])
        C.chat(f"{p}_chat_decode_{key}_eos", gresp([gch([*ids, EOS])]), chat_request=chat_req())
        C.comp(f"{p}_comp_decode_{key}_eos", [gresp([gch([*ids, EOS])])])
    ids = special_mix()
    C.chat(f"{p}_chat_special_tokens_default", gresp([gch([*ids, EOS])]), chat_request=chat_req())
    C.chat(f"{p}_chat_special_tokens_skip_true", gresp([gch([*ids, EOS])]),
           chat_request=chat_req(skip_special_tokens=True),
           note="skip_special_tokens is overridden (False) on the parser path")
    C.chat(f"{p}_chat_special_tokens_no_spaces", gresp([gch([*ids, EOS])]),
           chat_request=chat_req(spaces_between_special_tokens=False))
    C.comp(f"{p}_comp_special_tokens_default", [gresp([gch([*ids, EOS])])])
    C.comp(f"{p}_comp_special_tokens_keep", [gresp([gch([*ids, EOS])])],
           completion_request=comp_req(skip_special_tokens=False))
    adj = [BOS, PAD, PLACEHOLDER_0, USER_TOK, *e("x"), EOS]
    C.chat(f"{p}_chat_bos_pad_placeholder", gresp([gch(adj)]), chat_request=chat_req())
    txt = [*e("Hello world."), EOS]
    C.chat(f"{p}_chat_eos_dropped", gresp([gch(txt)]), chat_request=chat_req())
    C.chat(f"{p}_chat_eos_include_stop_str", gresp([gch(txt)]),
           chat_request=chat_req(include_stop_str_in_output=True))
    C.chat(f"{p}_chat_eos_ignore_eos", gresp([gch(txt)]), chat_request=chat_req(ignore_eos=True))
    C.chat(f"{p}_chat_eos_length", gresp([gch(txt, finish="length")]), chat_request=chat_req())
    s = e("The answer is 42.\n\nNext question END")
    C.chat(f"{p}_chat_stop_list", gresp([gch(s)]), chat_request=chat_req(stop=["END", "\n\n"]))
    C.chat(f"{p}_chat_stop_reason_str", gresp([gch(s, stop_reason="42")]), chat_request=chat_req())
    C.chat(f"{p}_chat_stop_token_ids", gresp([gch([*e("Done"), USER_TOK])]),
           chat_request=chat_req(stop_token_ids=[USER_TOK]))
    C.chat(f"{p}_chat_cut_mid_char", gresp([gch(e("🤖🔥")[:-1], finish="length")]), chat_request=chat_req())
    rid = e(TEXTS["english"])[:15]
    lp = make_logprobs(rng_for(f"{p}-lp"), [*rid, EOS], 5)
    C.chat(f"{p}_chat_logprobs_top5", gresp([gch([*rid, EOS], logprobs=lp)]),
           chat_request=chat_req(logprobs=True, top_logprobs=5))
    C.chat(f"{p}_chat_logprobs_top0", gresp([gch([*rid, EOS], logprobs=lp)]),
           chat_request=chat_req(logprobs=True, top_logprobs=0))
    C.chat(f"{p}_chat_logprobs_flag_false", gresp([gch([*rid, EOS], logprobs=lp)]), chat_request=chat_req())
    C.comp(f"{p}_comp_logprobs_1", [gresp([gch([*rid, EOS], logprobs=lp)])],
           completion_request=comp_req(logprobs=1))
    C.chat(f"{p}_chat_return_token_ids", gresp([gch([*rid, EOS])], prompt_token_ids=e(PROMPT_TEXT)),
           chat_request=chat_req(return_token_ids=True))
    C.chat(f"{p}_chat_passthrough", gresp([gch([*rid, EOS])], kv_transfer_params={"k": 1},
                                          metrics={"mean_itl_ms": 2.0}, prompt_logprobs=[None]),
           chat_request=chat_req(), prompt_tokens=3)
    C.chat(f"{p}_chat_multi_choice", gresp([gch([*rid, EOS], 0), gch(rid[:3], 1, finish="length")]),
           chat_request=chat_req(n=2))
    # errors specific to parser configs
    C.chat(f"err_{p}_chat_without_chat_request", gresp([gch(txt)]))
    C.chat(f"err_{p}_chat_chat_request_null", gresp([gch(txt)]), chat_request=None)
    C.chat(f"err_{p}_chat_without_chat_request_empty_tokens", gresp([gch([])]))
    C.chat(f"err_{p}_chat_empty_tokens", gresp([gch([])]), chat_request=chat_req())
    C.chat(f"err_{p}_chat_unknown_model", gresp([gch(txt)]), chat_request=chat_req(), model="nope")
    C.chat(f"err_{p}_chat_over_max_model_len", gresp([gch([3] * (MAX_MODEL_LEN + 1), finish="length")]))
    C.comp(f"{p}_comp_without_completion_request", [gresp([gch(txt)])])
    C.chat(f"{p}_chat_token_id_out_of_vocab", gresp([gch([*e("a"), VOCAB_SIZE, *e("b")], finish="length")]),
           chat_request=chat_req())
    C.chat(f"{p}_chat_logprob_neg_inf",
           gresp([gch(e("nan test"), finish="length", logprobs=make_inf_lp(e("nan test")))]),
           chat_request=chat_req(logprobs=True, top_logprobs=2))
    C.chat(f"{p}_chat_logprob_neg_inf_include_reasoning_false",
           gresp([gch(e("nan test"), finish="length", logprobs=make_inf_lp(e("nan test")))]),
           chat_request=chat_req(logprobs=True, top_logprobs=2, include_reasoning=False),
           note="include_reasoning=false drops logprobs before serialisation")
    C.add(f"err_{p}_chat_malformed_json", CHAT, raw='{"generate_response": ')


def make_inf_lp(ids):
    return {"content": [{"token_id": t, "logprob": -math.inf, "rank": 1,
                         "top_logprobs": [{"token_id": t, "logprob": -math.inf, "rank": 1}]} for t in ids]}


def think_ids(reasoning: str, content: str, *, plain=False, start=True, end=True, eos=True):
    e = enc
    ids: list[int] = []
    if start:
        ids += enc_parts("<", "think", ">") if plain else [THINK]
    ids += e(reasoning)
    if end:
        ids += enc_parts("</", "think", ">") if plain else [END_THINK]
    ids += e(content)
    if eos:
        ids += [EOS]
    return ids


REASON = "\nThe user greets me. I should answer politely, maybe in 中文 too. 🤔\n"
ANSWER = "\n\nHello! 你好！How can I help you today?"


def add_reasoning_common(C: Cases, p: str):
    e = enc
    cr = chat_req()
    C.chat(f"{p}_reasoning_think_tokens", gresp([gch(think_ids(REASON, ANSWER))]), chat_request=cr)
    C.chat(f"{p}_reasoning_think_plain_chars", gresp([gch(think_ids(REASON, ANSWER, plain=True))]),
           chat_request=cr, note="<think>/</think> spelled with ordinary tokens")
    C.chat(f"{p}_reasoning_end_plain_chars_only", gresp([gch(think_ids(REASON, ANSWER, plain=True, start=False))]),
           chat_request=cr)
    C.chat(f"{p}_reasoning_markerless", gresp([gch(think_ids(REASON, ANSWER, start=False))]), chat_request=cr)
    C.chat(f"{p}_reasoning_open_at_end_length",
           gresp([gch(think_ids(REASON, "", end=False, eos=False), finish="length")]), chat_request=cr)
    C.chat(f"{p}_reasoning_open_at_end_eos", gresp([gch(think_ids(REASON, "", end=False))]), chat_request=cr)
    C.chat(f"{p}_reasoning_no_markers", gresp([gch([*e(ANSWER), EOS])]), chat_request=cr)
    C.chat(f"{p}_reasoning_empty_think", gresp([gch(think_ids("", ANSWER))]), chat_request=cr)
    C.chat(f"{p}_reasoning_empty_content", gresp([gch(think_ids(REASON, ""))]), chat_request=cr)
    C.chat(f"{p}_reasoning_only_end_token", gresp([gch([END_THINK, EOS])]), chat_request=cr)
    C.chat(f"{p}_reasoning_only_start_token", gresp([gch([THINK], finish="length")]), chat_request=cr)
    C.chat(f"{p}_reasoning_two_think_blocks",
           gresp([gch([THINK, *e("first"), END_THINK, *e(" mid "), THINK, *e("second"),
                       END_THINK, *e(" final"), EOS])]),
           chat_request=cr)
    C.chat(f"{p}_reasoning_nested_think_start",
           gresp([gch([THINK, *e("a"), THINK, *e("b"), END_THINK, *e("c"), EOS])]), chat_request=cr)
    C.chat(f"{p}_reasoning_text_before_think",
           gresp([gch([*e("Preamble. "), THINK, *e("hidden"), END_THINK, *e(" shown"), EOS])]),
           chat_request=cr)
    C.chat(f"{p}_reasoning_include_reasoning_false", gresp([gch(think_ids(REASON, ANSWER))]),
           chat_request=chat_req(include_reasoning=False))
    lp_ids = think_ids("short", " answer")
    lp = make_logprobs(rng_for(f"{p}-reason-lp"), lp_ids, 2)
    C.chat(f"{p}_reasoning_include_reasoning_false_logprobs_token_ids",
           gresp([gch(lp_ids, logprobs=lp)], prompt_token_ids=e(PROMPT_TEXT)),
           chat_request=chat_req(include_reasoning=False, logprobs=True, top_logprobs=2, return_token_ids=True),
           note="logprobs and token_ids hidden when include_reasoning=false")
    C.chat(f"{p}_reasoning_logprobs_token_ids",
           gresp([gch(lp_ids, logprobs=lp)], prompt_token_ids=e(PROMPT_TEXT)),
           chat_request=chat_req(logprobs=True, top_logprobs=2, return_token_ids=True))
    C.comp(f"{p}_comp_think_tokens", [gresp([gch(think_ids(REASON, ANSWER))])],
           note="completions never run the parser")
    C.comp(f"{p}_comp_think_tokens_keep_special", [gresp([gch(think_ids(REASON, ANSWER))])],
           completion_request=comp_req(skip_special_tokens=False))
    # prompt context
    prompt_open = [*e(PROMPT_TEXT), THINK]
    prompt_closed = [*e(PROMPT_TEXT), THINK, *e("old"), END_THINK]
    out = think_ids(REASON, ANSWER, start=False)
    C.chat(f"{p}_reasoning_prompt_open_think_in_generate", gresp([gch(out)], prompt_token_ids=prompt_open),
           chat_request=cr)
    C.chat(f"{p}_reasoning_prompt_open_think_top_level", gresp([gch(out)]), prompt_token_ids=prompt_open,
           chat_request=cr)
    C.chat(f"{p}_reasoning_prompt_closed_think_in_generate", gresp([gch([*e(ANSWER), EOS])],
                                                                   prompt_token_ids=prompt_closed),
           chat_request=cr)
    C.chat(f"{p}_reasoning_prompt_closed_think_top_level", gresp([gch([*e(ANSWER), EOS])]),
           prompt_token_ids=prompt_closed, chat_request=cr)
    # chat_template_kwargs
    for tag, kw in (("thinking_true", {"thinking": True}), ("thinking_false", {"thinking": False}),
                    ("enable_thinking_false", {"enable_thinking": False}),
                    ("enable_thinking_true", {"enable_thinking": True}),
                    ("reasoning_effort_none", {"reasoning_effort": "none"}),
                    ("empty", {})):
        C.chat(f"{p}_kwargs_{tag}_markerless", gresp([gch(think_ids(REASON, ANSWER, start=False))]),
               chat_request=chat_req(chat_template_kwargs=kw))
        C.chat(f"{p}_kwargs_{tag}_no_markers", gresp([gch([*e(ANSWER), EOS])]),
               chat_request=chat_req(chat_template_kwargs=kw))
        C.chat(f"{p}_kwargs_{tag}_think_tokens", gresp([gch(think_ids(REASON, ANSWER))]),
               chat_request=chat_req(chat_template_kwargs=kw))
    C.chat(f"{p}_reasoning_effort_field_none", gresp([gch(think_ids(REASON, ANSWER, start=False))]),
           chat_request=chat_req(reasoning_effort="none"))
    C.chat(f"{p}_reasoning_effort_field_high", gresp([gch(think_ids(REASON, ANSWER, start=False))]),
           chat_request=chat_req(reasoning_effort="high"))
    # stop strings inside reasoning
    C.chat(f"{p}_reasoning_stop_string_in_reasoning", gresp([gch(think_ids("think STOP more", " answer"))]),
           chat_request=chat_req(stop=["STOP"]))
    # long-ish
    long_reason = (REASON * 20)
    C.chat(f"{p}_reasoning_long", gresp([gch(think_ids(long_reason, ANSWER * 5))]), chat_request=cr)


def hermes(name, args, *, raw_args=None):
    body = raw_args if raw_args is not None else json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


def add_hermes(C: Cases):
    p = "r1_hermes"
    e = enc
    one = hermes("get_weather", {"location": "Paris", "unit": "celsius"})
    two = one + "\n" + hermes("search", {"query": "best café in 東京 🍵", "filters": {"open": True, "tags": ["a", "b"]},
                                        "limit": 3})
    tr = chat_req(tools=TOOLS)

    def ids_of(text, reasoning=None, eos=True):
        ids = []
        if reasoning is not None:
            ids += [THINK, *e(reasoning), END_THINK]
        ids += e(text)
        return ids + ([EOS] if eos else [])

    C.chat(f"{p}_tool_one_auto", gresp([gch(ids_of(one, "I need the weather."))]),
           chat_request=chat_req(tools=TOOLS, tool_choice="auto"))
    C.chat(f"{p}_tool_one_default_choice", gresp([gch(ids_of(one, "I need the weather."))]), chat_request=tr)
    C.chat(f"{p}_tool_one_no_reasoning_block", gresp([gch(ids_of(one))]), chat_request=tr)
    C.chat(f"{p}_tool_one_markerless_reasoning", gresp([gch([*e("thinking..."), END_THINK, *ids_of(one)])]),
           chat_request=tr)
    C.chat(f"{p}_tool_two", gresp([gch(ids_of(two, "Two calls."))]), chat_request=tr)
    C.chat(f"{p}_tool_two_parallel_false", gresp([gch(ids_of(two, "Two calls."))]),
           chat_request=chat_req(tools=TOOLS, parallel_tool_calls=False))
    C.chat(f"{p}_tool_surrounding_text", gresp([gch(ids_of("Let me check.\n" + one + "\nDone checking.", "r"))]),
           chat_request=tr)
    C.chat(f"{p}_tool_invalid_json",
           gresp([gch(ids_of(hermes("", None, raw_args='{"name": "get_weather", "arguments": {"location": "Par'),
                             "r"))]),
           chat_request=tr)
    C.chat(f"{p}_tool_invalid_json_then_valid",
           gresp([gch(ids_of(hermes("", None, raw_args="{not json}") + "\n" + one, "r"))]),
           chat_request=tr)
    C.chat(f"{p}_tool_arguments_string",
           gresp([gch(ids_of(hermes("", None,
                                    raw_args='{"name": "get_weather", "arguments": "{\\"location\\": \\"Rome\\"}"}'),
                             "r"))]),
           chat_request=tr)
    C.chat(f"{p}_tool_no_arguments_key", gresp([gch(ids_of(hermes("", None, raw_args='{"name": "search"}'), "r"))]),
           chat_request=tr)
    C.chat(f"{p}_tool_unknown_function_name", gresp([gch(ids_of(hermes("launch_rocket", {"when": "now"}), "r"))]),
           chat_request=tr)
    C.chat(f"{p}_tool_unclosed",
           gresp([gch(ids_of('<tool_call>\n{"name": "get_weather", "arguments": {"location": "Oslo"}}', "r", eos=False),
                      finish="length")]),
           chat_request=tr)
    C.chat(f"{p}_tool_unclosed_eos",
           gresp([gch(ids_of('<tool_call>\n{"name": "get_weather", "arguments": {"location": "Oslo"}}', "r"))]),
           chat_request=tr)
    C.chat(f"{p}_tool_finish_length", gresp([gch(ids_of(one, "r", eos=False), finish="length")]), chat_request=tr)
    C.chat(f"{p}_tool_stop_reason_int", gresp([gch(ids_of(one, "r"), stop_reason=EOS)]), chat_request=tr)
    C.chat(f"{p}_tool_tools_absent", gresp([gch(ids_of(one, "r"))]), chat_request=chat_req())
    C.chat(f"{p}_tool_choice_none", gresp([gch(ids_of(one, "r"))]),
           chat_request=chat_req(tools=TOOLS, tool_choice="none"))
    C.chat(f"{p}_tool_choice_required_hermes_text", gresp([gch(ids_of(one, "r"))]),
           chat_request=chat_req(tools=TOOLS, tool_choice="required"))
    req_json = json.dumps([{"name": "get_weather", "parameters": {"location": "Berlin"}},
                           {"name": "search", "parameters": {"query": "q"}}])
    C.chat(f"{p}_tool_choice_required_json_array", gresp([gch(ids_of(req_json, "r"))]),
           chat_request=chat_req(tools=TOOLS, tool_choice="required"))
    C.chat(f"{p}_tool_choice_required_json_array_parallel_false", gresp([gch(ids_of(req_json, "r"))]),
           chat_request=chat_req(tools=TOOLS, tool_choice="required", parallel_tool_calls=False))
    C.chat(f"{p}_tool_choice_required_invalid", gresp([gch(ids_of("no tools here", "r"))]),
           chat_request=chat_req(tools=TOOLS, tool_choice="required"))
    C.chat(f"{p}_tool_choice_named_json_args", gresp([gch(ids_of('{"location": "Madrid", "days": 2}', "r"))]),
           chat_request=chat_req(tools=TOOLS, tool_choice=NAMED_WEATHER))
    C.chat(f"{p}_tool_choice_named_hermes_text", gresp([gch(ids_of(one, "r"))]),
           chat_request=chat_req(tools=TOOLS, tool_choice=NAMED_WEATHER))
    C.chat(f"{p}_tool_choice_named_empty_content", gresp([gch(ids_of("", "r"))]),
           chat_request=chat_req(tools=TOOLS, tool_choice=NAMED_WEATHER))
    C.chat(f"{p}_tool_choice_named_finish_length",
           gresp([gch(ids_of('{"location": "Mad', "r", eos=False), finish="length")]),
           chat_request=chat_req(tools=TOOLS, tool_choice=NAMED_WEATHER))
    C.chat(f"{p}_tool_inside_reasoning",
           gresp([gch([THINK, *e("maybe " + one), END_THINK, *e("No call."), EOS])]),
           chat_request=tr)
    C.chat(f"{p}_tool_include_reasoning_false", gresp([gch(ids_of(one, "secret"))]),
           chat_request=chat_req(tools=TOOLS, include_reasoning=False))
    C.chat(f"{p}_tool_unicode_args",
           gresp([gch(ids_of(hermes("search", {"query": "naïve 日本語 👨‍👩‍👧 \"q\" \\ \n"}), "r"))]),
           chat_request=tr)
    C.chat(f"{p}_tool_multi_choice", gresp([gch(ids_of(one, "r"), 0), gch(ids_of("plain answer", "r"), 1)]),
           chat_request=chat_req(tools=TOOLS, n=2))
    C.chat(f"{p}_tool_with_logprobs",
           gresp([gch(ids_of(one, "r"), logprobs=make_logprobs(rng_for("hermes-lp"), ids_of(one, "r"), 1))]),
           chat_request=chat_req(tools=TOOLS, logprobs=True, top_logprobs=1))
    C.chat(f"{p}_tool_stop_string_cuts_call", gresp([gch(ids_of(one, "r"))]),
           chat_request=chat_req(tools=TOOLS, stop=["</tool_call>"]))
    C.chat(f"{p}_tool_dsml_text_in_hermes", gresp([gch(ids_of(DSML_ONE, "r"))]), chat_request=tr)
    C.chat(f"{p}_tool_history_messages", gresp([gch(ids_of(one, "r"))]),
           chat_request={"messages": [
               {"role": "user", "content": "weather?"},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
               {"role": "user", "content": "again"}], "tools": TOOLS})


DSML = "｜DSML｜"


def dsml_invoke(name, params):
    out = f'<{DSML}invoke name="{name}">\n'
    for pname, is_str, val in params:
        attr = "" if is_str is None else f' string="{is_str}"'
        out += f'<{DSML}parameter name="{pname}"{attr}>{val}</{DSML}parameter>\n'
    out += f"</{DSML}invoke>\n"
    return out


def dsml_block(*invokes, start=f"<{DSML}tool_calls>"):
    return f"{start}\n" + "".join(invokes) + f"</{DSML}tool_calls>"


DSML_ONE = dsml_block(dsml_invoke("get_weather", [("location", "true", "杭州"), ("days", "false", "5")]))


def add_v4(C: Cases):
    p = "v4"
    e = enc
    tr = chat_req(tools=TOOLS)
    two = dsml_block(
        dsml_invoke("get_weather", [("location", "true", "Paris"), ("unit", "true", "celsius")]),
        dsml_invoke("search", [("query", "true", "best café 🍵"),
                               ("filters", "false", '{"open": true, "tags": ["a", {"b": null}]}'),
                               ("limit", "false", "3"), ("safe", "false", "false")]))

    def ids_of(text, reasoning="Need a tool.", eos=True, start=False):
        ids = []
        if reasoning is not None:
            ids += ([THINK] if start else []) + e(reasoning) + [END_THINK]
        ids += e(text)
        return ids + ([EOS] if eos else [])

    C.chat(f"{p}_tool_one", gresp([gch(ids_of(DSML_ONE))]), chat_request=tr)
    C.chat(f"{p}_tool_one_with_think_start", gresp([gch(ids_of(DSML_ONE, start=True))]), chat_request=tr)
    C.chat(f"{p}_tool_one_auto_explicit", gresp([gch(ids_of(DSML_ONE))]),
           chat_request=chat_req(tools=TOOLS, tool_choice="auto"))
    C.chat(f"{p}_tool_one_thinking_false", gresp([gch([*e(DSML_ONE), EOS])]),
           chat_request=chat_req(tools=TOOLS, chat_template_kwargs={"thinking": False}))
    C.chat(f"{p}_tool_one_thinking_default_no_reasoning", gresp([gch([*e(DSML_ONE), EOS])]), chat_request=tr,
           note="thinking defaults on: text before any </think> is reasoning")
    C.chat(f"{p}_tool_two_invokes", gresp([gch(ids_of(two))]), chat_request=tr)
    C.chat(f"{p}_tool_two_invokes_parallel_false", gresp([gch(ids_of(two))]),
           chat_request=chat_req(tools=TOOLS, parallel_tool_calls=False))
    C.chat(f"{p}_tool_content_before", gresp([gch(ids_of("Let me look that up.\n\n" + DSML_ONE))]), chat_request=tr)
    C.chat(f"{p}_tool_text_after_block_dropped", gresp([gch(ids_of(DSML_ONE + "\nTrailing words."))]), chat_request=tr)
    C.chat(f"{p}_tool_two_blocks",
           gresp([gch(ids_of(DSML_ONE + "\n" + dsml_block(dsml_invoke("search", [("query", "true", "x")]))))]),
           chat_request=tr)
    C.chat(f"{p}_tool_missing_string_attr", gresp([gch(ids_of(dsml_block(dsml_invoke("search", [
        ("limit", None, "7"), ("query", None, "plain text")]))))]),
           chat_request=tr)
    C.chat(f"{p}_tool_string_false_invalid_json", gresp([gch(ids_of(dsml_block(dsml_invoke("search", [
        ("filters", "false", "{not: json}"), ("limit", "false", "three")]))))]),
           chat_request=tr)
    C.chat(f"{p}_tool_string_true_json_looking", gresp([gch(ids_of(dsml_block(dsml_invoke("search", [
        ("query", "true", '{"a": 1}'), ("limit", "true", "5")]))))]),
           chat_request=tr)
    C.chat(f"{p}_tool_nested_json_values", gresp([gch(ids_of(dsml_block(dsml_invoke("search", [
        ("filters", "false", '{"range": {"from": 1, "to": [2, 3.5, -1e3]}, "flags": [true, false, null], "s": "ü"}'),
        ("query", "true", "multi\nline \"quoted\" <b>html</b>")]))))]),
        chat_request=tr)
    C.chat(f"{p}_tool_no_params", gresp([gch(ids_of(dsml_block(dsml_invoke("search", []))))]), chat_request=tr)
    C.chat(f"{p}_tool_variant_toolcalls", gresp([gch(ids_of(dsml_block(dsml_invoke("search", [("query", "true", "v")]),
                                                                       start=f"<{DSML}toolcalls>")))]), chat_request=tr)
    C.chat(f"{p}_tool_variant_tool", gresp([gch(ids_of(dsml_block(dsml_invoke("search", [("query", "true", "v")]),
                                                                   start=f"<{DSML}tool>")))]), chat_request=tr)
    C.chat(f"{p}_tool_invoke_without_block", gresp([gch(ids_of(dsml_invoke("search", [("query", "true", "bare")])))]),
           chat_request=tr)
    C.chat(f"{p}_tool_inside_think", gresp([gch([THINK, *e("I will call. " + DSML_ONE), EOS])]), chat_request=tr)
    C.chat(f"{p}_tool_markerless_reasoning_then_block", gresp([gch([*e("reason first " + DSML_ONE), EOS])]),
           chat_request=tr)
    C.chat(f"{p}_tool_unclosed_length", gresp([gch(ids_of(DSML_ONE[:-30], eos=False), finish="length")]),
           chat_request=tr)
    C.chat(f"{p}_tool_unclosed_param_length",
           gresp([gch(ids_of(f'<{DSML}tool_calls>\n<{DSML}invoke name="get_weather">\n'
                             f'<{DSML}parameter name="location" string="true">Ha', eos=False), finish="length")]),
           chat_request=tr)
    C.chat(f"{p}_tool_unclosed_eos", gresp([gch(ids_of(DSML_ONE[:-30]))]), chat_request=tr)
    C.chat(f"{p}_tool_finish_length_complete", gresp([gch(ids_of(DSML_ONE, eos=False), finish="length")]),
           chat_request=tr)
    C.chat(f"{p}_tool_tools_absent", gresp([gch(ids_of(DSML_ONE))]), chat_request=chat_req())
    C.chat(f"{p}_tool_choice_none", gresp([gch(ids_of(DSML_ONE))]),
           chat_request=chat_req(tools=TOOLS, tool_choice="none"))
    C.chat(f"{p}_tool_choice_required_dsml", gresp([gch(ids_of(DSML_ONE))]),
           chat_request=chat_req(tools=TOOLS, tool_choice="required"))
    req_json = json.dumps([{"name": "get_weather", "parameters": {"location": "Berlin"}}])
    C.chat(f"{p}_tool_choice_required_json", gresp([gch(ids_of(req_json))]),
           chat_request=chat_req(tools=TOOLS, tool_choice="required"))
    C.chat(f"{p}_tool_choice_named_dsml", gresp([gch(ids_of(DSML_ONE))]),
           chat_request=chat_req(tools=TOOLS, tool_choice=NAMED_WEATHER))
    C.chat(f"{p}_tool_choice_named_json", gresp([gch(ids_of('{"location": "Madrid"}'))]),
           chat_request=chat_req(tools=TOOLS, tool_choice=NAMED_WEATHER))
    C.chat(f"{p}_tool_unknown_function",
           gresp([gch(ids_of(dsml_block(dsml_invoke("launch_rocket", [("when", "true", "now")]))))]),
           chat_request=tr)
    C.chat(f"{p}_tool_arguments_wrapper_unwrapped", gresp([gch(ids_of(dsml_block(dsml_invoke("get_weather", [
        ("arguments", "false", '{"location": "Lima", "days": 1}')]))))]),
           chat_request=tr)
    C.chat(f"{p}_tool_input_wrapper_string", gresp([gch(ids_of(dsml_block(dsml_invoke("get_weather", [
        ("input", "true", '{"location": "Lima"}')]))))]),
           chat_request=tr)
    C.chat(f"{p}_tool_arguments_wrapper_no_tools", gresp([gch(ids_of(dsml_block(dsml_invoke("get_weather", [
        ("arguments", "false", '{"location": "Lima"}')]))))]),
           chat_request=chat_req(tools=TOOLS[1:]))
    # DSML spelled with ordinary tokens instead of the added token 128825
    plain = enc_parts("<", "｜", "DSML", "｜", "tool_calls>\n<", "｜", "DSML", "｜",
                      'invoke name="search">\n<', "｜", "DSML", "｜",
                      'parameter name="query" string="true">plain</', "｜", "DSML", "｜",
                      "parameter>\n</", "｜", "DSML", "｜",
                      "invoke>\n</", "｜", "DSML", "｜", "tool_calls>")
    C.chat(f"{p}_tool_dsml_plain_chars", gresp([gch([*e("r"), END_THINK, *plain, EOS])]), chat_request=tr)
    C.chat(f"{p}_tool_include_reasoning_false", gresp([gch(ids_of(DSML_ONE, "secret plan"))]),
           chat_request=chat_req(tools=TOOLS, include_reasoning=False))
    C.chat(f"{p}_tool_with_logprobs",
           gresp([gch(ids_of(DSML_ONE), logprobs=make_logprobs(rng_for("v4-lp"), ids_of(DSML_ONE), 1))]),
           chat_request=chat_req(tools=TOOLS, logprobs=True, top_logprobs=1))
    C.chat(f"{p}_tool_multi_choice", gresp([gch(ids_of(DSML_ONE), 0), gch(ids_of("just text"), 1)]),
           chat_request=chat_req(tools=TOOLS, n=2))
    C.chat(f"{p}_tool_hermes_text", gresp([gch(ids_of(hermes("get_weather", {"location": "Paris"})))]), chat_request=tr)
    C.chat(f"{p}_tool_stop_string_inside_block", gresp([gch(ids_of(DSML_ONE))]),
           chat_request=chat_req(tools=TOOLS, stop=["</｜DSML｜invoke>"]))
    C.chat(f"{p}_tool_history_messages", gresp([gch(ids_of(DSML_ONE))]),
           chat_request={"messages": [
               {"role": "user", "content": "weather?"},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
               {"role": "user", "content": "again"}], "tools": TOOLS})
    C.chat(f"{p}_tool_thinking_false_with_think_block", gresp([gch(ids_of(DSML_ONE, start=True))]),
           chat_request=chat_req(tools=TOOLS, chat_template_kwargs={"thinking": False}))
    C.chat(f"{p}_thinking_false_bare_end_think", gresp([gch([*e("content"), END_THINK, *e(" more"), EOS])]),
           chat_request=chat_req(chat_template_kwargs={"thinking": False}))


def add_release_changes(C: Cases, config: str):
    """What vLLM 0.34 changed in derender (issue 34), recorded from every
    release alike: `tools: []` with each tool_choice, a named tool no tool
    has; on the plain config also prompt logprobs without `decoded_token`
    (a `--tokens-only` generate server), `prompt_tokens` taken from the
    generate usage, and `return_tokens_as_token_ids` with split characters."""
    e = enc
    p = "" if config == "plain" else f"{config}_"
    out = [*e("Changed in 0.34."), EOS]
    calls = [*e(hermes("get_weather", {"location": "Paris"}) if config == "r1_hermes" else DSML_ONE), EOS]
    for choice, tag in ((MISSING, "absent"), ("auto", "auto"), ("required", "required"), ("none", "none"),
                        (None, "null")):
        kw = {} if choice is MISSING else {"tool_choice": choice}
        C.chat(f"{p}chat_tools_empty_choice_{tag}", gresp([gch(calls)]), chat_request=chat_req(tools=[], **kw))
    C.chat(f"err_{p}chat_tools_empty_named", gresp([gch(out)]),
           chat_request=chat_req(tools=[], tool_choice=NAMED_WEATHER))
    C.chat(f"err_{p}chat_named_tool_mismatch", gresp([gch(out)]),
           chat_request=chat_req(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}))
    if config != "plain":
        return
    rng = rng_for("release-changes")
    emo = e(TEXTS["emoji"])[:14]
    pool = cand_pool()

    def plp(ids, decoded=None):
        entries = [None]
        for i, t in enumerate(ids[1:]):
            entry = {str(t): {"logprob": round(-0.3 - i / 10, 2), "rank": 1, "decoded_token": decoded}}
            for j in range(2):
                entry[str(rng.choice(pool))] = {"logprob": round(-2.0 - j, 2), "rank": j + 2, "decoded_token": decoded}
            entries.append(entry)
        return entries

    split = e("héllo 東京") + emo
    C.chat("chat_prompt_logprobs_decoded_null", gresp([gch(out)], prompt_token_ids=split,
                                                        prompt_logprobs=plp(split)))
    C.chat("chat_prompt_logprobs_decoded_mixed", gresp([gch(out)], prompt_logprobs=[
        None, {"5": {"logprob": -1.0, "rank": 1, "decoded_token": "kept"}, "7": {"logprob": -2.0, "rank": 2}},
        {str(emo[0]): {"logprob": -0.5, "rank": 1, "decoded_token": None}}, {}, None]))
    C.chat("chat_prompt_logprobs_out_of_vocab_id", gresp([gch(out)], prompt_logprobs=[
        None, {"129300": {"logprob": -1.0, "rank": 1, "decoded_token": None}}]))
    C.comp("comp_prompt_logprobs_decoded_null", [gresp([gch(out, 0), gch(e("cut"), 1, finish="length")],
                                                       rid="a", prompt_logprobs=plp(split))])
    C.comp("comp_prompt_logprobs_two_responses", [
        gresp([gch(out)], rid="a", prompt_logprobs=plp(e("first prompt"))),
        gresp([gch(out)], rid="b"),
        gresp([gch(out)], rid="c", prompt_logprobs=plp(emo, decoded="given"))])
    usage = lambda n: {"prompt_tokens": n, "completion_tokens": 3, "total_tokens": n + 3}  # noqa: E731
    C.chat("chat_prompt_tokens_from_generate_usage", gresp([gch(out)], usage=usage(23)))
    C.chat("chat_prompt_tokens_given_beats_usage", gresp([gch(out)], usage=usage(23)), prompt_tokens=4)
    C.comp("comp_prompt_tokens_from_generate_usage", [
        gresp([gch(out)], rid="a", usage=usage(5)), gresp([gch(out)], rid="b"),
        gresp([gch(out)], rid="c", usage=usage(8))])
    for key in ("emoji", "fffd"):
        ids = e(TEXTS[key])[:12]
        lp = make_logprobs(rng_for(f"tokens-as-ids-{key}"), ids, 3)
        C.chat(f"chat_return_tokens_as_token_ids_{key}", gresp([gch(ids, finish="length", logprobs=lp)]),
               chat_request=chat_req(logprobs=True, top_logprobs=3, return_tokens_as_token_ids=True))
        C.comp(f"comp_return_tokens_as_token_ids_{key}", [gresp([gch(ids, finish="length", logprobs=lp)])],
               completion_request=comp_req(logprobs=2, return_tokens_as_token_ids=True))
    C.chat("chat_return_tokens_as_token_ids_false", gresp([gch(emo, finish="length", logprobs=make_logprobs(
        rng_for("tokens-as-ids-false"), emo, 1))]),
        chat_request=chat_req(logprobs=True, top_logprobs=1, return_tokens_as_token_ids=False))


def build_cases(config: str) -> Cases:
    C = Cases(config)
    add_release_changes(C, config)
    if config == "plain":
        add_decode_corpus(C)
        add_decode_corpus(C, chat_request=chat_req(), completion_request=comp_req(), prefix="req_")
        add_decode_variants(C)
        add_cut_mid_char(C)
        add_random_ids(C)
        add_special_tokens(C)
        add_logprobs_chat(C)
        add_logprobs_completion(C)
        add_stops(C)
        add_return_ids_and_prompt(C)
        add_multi(C)
        add_passthrough(C)
        add_long(C)
        add_errors(C)
        # parser-looking output without a parser
        C.chat("plain_hermes_tool_text", gresp([gch([*enc(hermes("get_weather", {"location": "Paris"})), EOS])]),
               chat_request=chat_req(tools=TOOLS))
        C.chat("plain_dsml_tool_text", gresp([gch([*enc(DSML_ONE), EOS])]), chat_request=chat_req(tools=TOOLS))
        C.chat("plain_think_with_reasoning_fields", gresp([gch(think_ids(REASON, ANSWER))]),
               chat_request=chat_req(include_reasoning=False, chat_template_kwargs={"thinking": True}))
        C.chat("plain_tool_choice_required_json",
               gresp([gch([*enc('[{"name": "get_weather", "parameters": {"location": "X"}}]'), EOS])]),
               chat_request=chat_req(tools=TOOLS, tool_choice="required"))
    elif config == "r1_hermes":
        add_parser_shared(C, "r1_hermes")
        add_reasoning_common(C, "r1_hermes")
        add_hermes(C)
    elif config == "v4":
        add_parser_shared(C, "v4")
        add_reasoning_common(C, "v4")
        add_v4(C)
    elif config == "v4_reasoning":
        add_reasoning_common(C, "v4_reasoning")
        C.chat("v4_reasoning_dsml_text", gresp([gch([*enc(DSML_ONE), EOS])]), chat_request=chat_req(tools=TOOLS))
    else:
        raise ValueError(config)
    return C


# --------------------------------------------------------------------------
# Server + HTTP
# --------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_cmd(vllm_bin: str, model: str, port: int, config: str) -> list[str]:
    return [vllm_bin, "launch", "render", "--model", model, "--served-model-name", MODEL_NAME,
            "--host", "127.0.0.1", "--port", str(port), "--max-model-len", str(MAX_MODEL_LEN),
            *CONFIGS[config]]


def start_server(vllm_bin, model, config, log_dir):
    port = free_port()
    cmd = server_cmd(vllm_bin, model, port, config)
    # An empty CUDA_VISIBLE_DEVICES lets 0.34 start on a CPU without Triton
    # (../shared/vllm-peer/README.md); 0.33 ignores it.
    env = dict(os.environ, VLLM_TARGET_DEVICE="cpu", CUDA_VISIBLE_DEVICES="")
    log_path = os.path.join(log_dir, f"server_{config}.log")
    with open(log_path, "wb") as log:  # the server holds its own copy of the descriptor
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.time() + 240
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server {config} exited with {proc.returncode}; see {log_path}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return proc, port, log_path, cmd
        except OSError:
            pass
        time.sleep(0.5)
    stop_server(proc)
    raise RuntimeError(f"server {config} did not become healthy; see {log_path}")


def stop_server(proc):
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def send(port, case):
    headers = {"Content-Type": "application/json"}
    if case.get("headers"):
        headers = dict(case["headers"])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    conn.request("POST", case["path"], body=case["_body"], headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data


def write_lines(path: str, lines: list[str]) -> None:
    """One JSON document a line; gzipped (reproducibly) for a `.gz` path."""
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    if path.endswith(".gz"):
        with gzip.GzipFile(path, "wb", mtime=0) as f:
            f.write(data)
    else:
        with open(path, "wb") as f:
            f.write(data)


def record_config(config, args, log_dir):
    C = build_cases(config)
    print(f"[{config}] {len(C.items)} cases; starting server", flush=True)
    t0 = time.time()
    proc, port, log_path, cmd = start_server(args.vllm, args.model, config, log_dir)
    print(f"[{config}] server up on port {port} in {time.time() - t0:.1f}s (log {log_path})", flush=True)
    out_path = os.path.join(args.out, f"cases_{config}.jsonl" + (".gz" if args.gz else ""))
    statuses: dict[int, int] = {}
    try:
        t1 = time.time()
        lines = []
        for case in C.items:
            status, data = send(port, case)
            body = case.pop("_body")
            case["status"] = status
            try:
                case["response"] = json.loads(data.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                case["raw_response"] = data.decode("utf-8", errors="replace")
            statuses[status] = statuses.get(status, 0) + 1
            lines.append(json.dumps(case, ensure_ascii=False, allow_nan=False))
            del body
        print(f"[{config}] sent in {time.time() - t1:.1f}s; statuses {dict(sorted(statuses.items()))}", flush=True)
    finally:
        stop_server(proc)
    write_lines(out_path, lines)
    return {"cases": len(C.items), "statuses": {str(k): v for k, v in sorted(statuses.items())},
            "server_argv": ["vllm"] + ["<port>" if x == str(port) else x for x in cmd[1:]],
            "file": os.path.basename(out_path)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="plain,r1_hermes,v4", help="comma list of " + ",".join(CONFIGS))
    ap.add_argument("--model", default="/work/peer/model")
    ap.add_argument("--vllm", default=os.path.join(os.path.dirname(sys.executable), "vllm"))
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--log-dir", default=None, help="server logs (default: a new temp dir)")
    ap.add_argument("--dry-run", action="store_true", help="build the cases, print counts, send nothing")
    ap.add_argument("--gz", action="store_true", help="write cases_<config>.jsonl.gz (the v0.34/ fixtures)")
    args = ap.parse_args()

    global TOK
    tok_path = os.path.join(args.model, "tokenizer.json")
    TOK = Tokenizer.from_file(tok_path)
    assert TOK.get_vocab_size() == VOCAB_SIZE, TOK.get_vocab_size()
    if args.dry_run:
        for config in args.configs.split(","):
            C = build_cases(config)
            size = sum(len(c["_body"]) for c in C.items)
            print(f"{config}: {len(C.items)} cases, {size / 1e6:.2f} MB of request bodies")
        return
    log_dir = args.log_dir or tempfile.mkdtemp(prefix="derender_golden_")
    os.makedirs(log_dir, exist_ok=True)

    import importlib.metadata as md
    meta_path = os.path.join(args.out, "meta.json")
    meta = {}
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
    with open(tok_path, "rb") as f:
        tok_sha256 = hashlib.sha256(f.read()).hexdigest()
    meta.update({
        "vllm_version": md.version("vllm"),
        "tokenizers_version": md.version("tokenizers"),
        "tokenizer_json_sha256": tok_sha256,
        "served_model_name": MODEL_NAME,
        "max_model_len": MAX_MODEL_LEN,
        "max_logprobs": MAX_LOGPROBS,
        "vllm_max_n_sequences": MAX_N_SEQUENCES,
        "vocab_size": VOCAB_SIZE,
        "seed": SEED,
        "env": {"VLLM_TARGET_DEVICE": "cpu"},
    })
    meta.setdefault("configs", {})
    t0 = time.time()
    for config in args.configs.split(","):
        meta["configs"][config] = record_config(config, args, log_dir)
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"done in {time.time() - t0:.1f}s; logs in {log_dir}", flush=True)


if __name__ == "__main__":
    main()
