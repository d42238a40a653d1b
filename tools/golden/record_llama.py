#!/usr/bin/env python3
"""Record the `llama` golden family: a Llama-style tokenizer (Metaspace,
BPE with byte fallback, decoder Replace/ByteFallback/Fuse/Strip; trained by
make_llama_tokenizer.py, stored in llama/) served by vLLM 0.33's render server.

    /work/peer/venv/bin/python tools/golden/record_llama.py [--port N]

Writes the model folder vLLM loads (tokenizer.json unpacked from
llama/tokenizer.json.gz, tokenizer_config.json, a minimal config.json) to a
temp dir, starts `vllm launch render` on it (plain config, no parsers;
`--port` uses a server already running on that folder instead), and writes
`cases_llama.jsonl` (same format as record_vllm.py) and `streams_llama.jsonl`
(same format as record_vllm_stream.py). Deterministic like record_vllm.py.
Imports only the stdlib, `tokenizers` and the two recorders beside it.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import record_vllm as R
import record_vllm_stream as S
from tokenizers import Tokenizer

HERE = R.HERE
LLAMA_DIR = os.path.join(HERE, "llama")
MODEL_NAME = "llama-fixture"
VOCAB_SIZE = 32006
UNK, BOS, EOS = 0, 1, 2
INST, END_INST, THINK, END_THINK, TOOL, END_TOOL = range(32000, 32006)
CHAT, COMP = R.CHAT, R.COMP


def byte_id(b: int) -> int:
    return 3 + b  # <0x00> .. <0xFF>


def write_model_dir(out: str) -> str:
    os.makedirs(out, exist_ok=True)
    with (gzip.open(os.path.join(LLAMA_DIR, "tokenizer.json.gz")) as f,
          open(os.path.join(out, "tokenizer.json"), "wb") as g):
        g.write(f.read())
    shutil.copy(os.path.join(LLAMA_DIR, "tokenizer_config.json"), out)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": VOCAB_SIZE,
                   "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                   "num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 4096,
                   "rms_norm_eps": 1e-6, "bos_token_id": BOS, "eos_token_id": EOS,
                   "torch_dtype": "bfloat16", "tie_word_embeddings": False}, f, indent=2)
    return out


def make_logprobs(rng, ids, k):
    """Engine layout ([sampled] + top-k) with candidates over the whole id
    space: text pieces, byte-fallback pieces, specials and added tokens."""
    content = []
    for tid in ids:
        cands = [{"token_id": tid, "logprob": -0.25, "rank": 1}]
        for j in range(k):
            r = rng.random()
            cid = (rng.randrange(0, 3) if r < 0.05 else rng.randrange(32000, VOCAB_SIZE) if r < 0.12
                   else byte_id(rng.randrange(0x80, 0x100)) if r < 0.4 else rng.randrange(259, 32000))
            cands.append({"token_id": cid, "logprob": round(-0.3 - j * 0.7 - rng.random(), 4), "rank": j + 2})
        content.append({"token_id": tid, "logprob": -0.25, "rank": 1,
                        "top_logprobs": cands[: k + 1] if k else []})
    return {"content": content}


def build_cases() -> R.Cases:
    C = R.Cases("llama")
    enc, gch, gresp, chat_req, comp_req = R.enc, R.gch, R.gresp, R.chat_req, R.comp_req
    prompt = enc(R.PROMPT_TEXT)
    for key, text in R.TEXTS.items():
        ids = enc(text)
        C.chat(f"chat_decode_{key}_eos", gresp([gch([*ids, EOS])], rid=f"chat-{key}"))
        C.comp(f"comp_decode_{key}_eos", [gresp([gch([*ids, EOS])], rid=f"cmpl-{key}")],
               completion_request=comp_req())
        C.chat(f"chat_seeded_{key}", gresp([gch(ids, finish="length")], prompt_token_ids=prompt),
               chat_request=chat_req())
        C.comp(f"comp_seeded_{key}", [gresp([gch(ids, finish="length")], prompt_token_ids=prompt)])
    # Characters cut by the end of the output, lone byte pieces between text.
    emoji = enc("ok 🚀")
    C.chat("chat_cut_mid_char_length", gresp([gch(emoji[:-1], finish="length")]))
    C.chat("chat_cut_mid_char_eos", gresp([gch([*emoji[:-1], EOS])]))
    C.comp("comp_cut_mid_char_length", [gresp([gch(emoji[:-2], finish="length")])])
    lone = [*enc("a"), byte_id(0xE6), *enc(" b"), byte_id(0x9D), byte_id(0x80), *enc(" c")]
    C.chat("chat_lone_byte_tokens_between_text", gresp([gch(lone, finish="length")]))
    C.comp("comp_lone_byte_tokens_between_text",
           [gresp([gch(lone, finish="length", logprobs=make_logprobs(R.rng_for("lone"), lone, 1))])],
           completion_request=comp_req(logprobs=1))
    # Special and added tokens.
    special = [BOS, *enc("Hi"), INST, *enc(" there"), END_INST, THINK, *enc("x 東"), END_THINK, UNK, *enc("!"), EOS]
    for skip in (True, False):
        tag = "skip" if skip else "keep"
        C.chat(f"chat_special_tokens_{tag}", gresp([gch(special)]), chat_request=chat_req(skip_special_tokens=skip))
        C.comp(f"comp_special_tokens_{tag}",
               [gresp([gch(special, logprobs=make_logprobs(R.rng_for(f"sp{tag}"), special, 2))])],
               completion_request=comp_req(skip_special_tokens=skip, logprobs=2))
        C.chat(f"chat_special_tokens_{tag}_include_stop", gresp([gch(special)]),
               chat_request=chat_req(skip_special_tokens=skip, include_stop_str_in_output=True))
    # Stop strings: bare and listed "", across tokens, inside byte-fallback characters, min_tokens.
    hw = enc("Hello, world! 東京 is big.")
    for name, stop in [("bare_empty", ""), ("list_empty", [""]), ("bare_word", "world"), ("across", "o, w"),
                       ("list_several", ["big", "東"]), ("cjk", "京"), ("at_start", "Hel"), ("none_match", ["zzz"])]:
        C.chat(f"chat_stop_{name}", gresp([gch(hw)]), chat_request=chat_req(stop=stop))
        C.comp(f"comp_stop_{name}", [gresp([gch(hw)])], completion_request=comp_req(stop=stop))
    C.chat("chat_stop_include_stop_str", gresp([gch(hw)]),
           chat_request=chat_req(stop=["world"], include_stop_str_in_output=True))
    for n in (0, 2, 5, 50):
        C.chat(f"chat_stop_min_tokens_{n}", gresp([gch(hw)]), chat_request=chat_req(stop=["l"], min_tokens=n))
    C.chat("chat_stop_reason_str", gresp([gch(hw, stop_reason="東京")]), chat_request=chat_req())
    C.chat("chat_stop_token_ids", gresp([gch([*hw, INST])]), chat_request=chat_req(stop_token_ids=[INST]))
    C.chat("chat_stop_bare_empty_logprobs", gresp([gch(hw, logprobs=make_logprobs(R.rng_for("sbel"), hw, 1))]),
           chat_request=chat_req(stop="", logprobs=True, top_logprobs=1))
    # Logprobs.
    mixed = enc("Hi 東京 🚀 naïve")
    for k in (0, 1, 5, 19, 20):
        lp = make_logprobs(R.rng_for(f"chat_lp_{k}"), mixed, k)
        # The engine's top-20 payload holds 21 entries: vLLM refuses it (DELIBERATE `21_entries`).
        name = "chat_logprobs_engine_top20_is_21_entries" if k == 20 else f"chat_logprobs_top{k}"
        C.chat(name, gresp([gch(mixed, finish="length", logprobs=lp)]),
               chat_request=chat_req(logprobs=True, top_logprobs=k))
    lp = make_logprobs(R.rng_for("chat_lp_noreq"), mixed, 3)
    C.chat("chat_logprobs_no_request", gresp([gch(mixed, finish="length", logprobs=lp)]))
    for k in (0, 1, 5):
        lp = make_logprobs(R.rng_for(f"comp_lp_{k}"), mixed, k + 1)
        C.comp(f"comp_logprobs_{k}", [gresp([gch(mixed, finish="length", logprobs=lp)])],
               completion_request=comp_req(logprobs=k))
    lp = make_logprobs(R.rng_for("comp_lp_none"), mixed, 2)
    C.comp("comp_logprobs_none", [gresp([gch(mixed, finish="length", logprobs=lp)])])
    # text_offset after a complete character: continuation bytes that cannot join.
    orphan = [*enc("word"), BOS, byte_id(0x9D), byte_id(0x80), *enc(" next")]
    C.comp("comp_text_offset_orphan_continuation",
           [gresp([gch(orphan, finish="length", logprobs=make_logprobs(R.rng_for("orph"), orphan, 0))])],
           completion_request=comp_req(logprobs=0))
    # Several choices and responses.
    C.chat("chat_n2", gresp([gch([*enc("one"), EOS]), gch(enc("two 東"), index=1, finish="length")]))
    C.comp("comp_two_responses", [gresp([gch([*enc("one"), EOS])], rid="r1"),
                                  gresp([gch(enc("two"), finish="length")], rid="r2")])
    C.chat("chat_return_token_ids", gresp([gch([*hw, EOS])], prompt_token_ids=prompt),
           chat_request=chat_req(return_token_ids=True))
    # Errors whose messages vLLM writes itself.
    one = make_logprobs(R.rng_for("err"), enc("x"), 1)
    for ids_name, ids in (("empty", []), ("null", None)):
        C.chat(f"err_chat_{ids_name}_token_ids_with_logprobs", gresp([gch(ids, logprobs=one)]))
        C.comp(f"err_comp_{ids_name}_token_ids_with_logprobs", [gresp([gch(ids, logprobs=one)], rid="ID")])
    C.chat("err_chat_second_choice_empty", gresp([gch(enc("x")), gch([], index=1)]))
    C.chat("err_chat_token_ids_over_max_model_len", gresp([gch([259] * (R.MAX_MODEL_LEN + 1))]))
    C.chat("err_chat_top_logprobs_over_max_logprobs",
           gresp([gch(enc("x"), logprobs=make_logprobs(R.rng_for("e21"), enc("x"), 21))]))
    C.comp("err_comp_empty_generate_responses", [])
    C.chat("err_chat_unknown_model", gresp([gch(enc("x"))]), model="nope")
    # What vLLM 0.34 changed (issue 34): token-id spellings, prompt logprobs without decoded_token.
    split = enc("ok 東京 🚀 naïve")
    lp = make_logprobs(R.rng_for("llama-tokens-as-ids"), split, 2)
    C.chat("chat_return_tokens_as_token_ids", gresp([gch(split, finish="length", logprobs=lp)]),
           chat_request=chat_req(logprobs=True, top_logprobs=2, return_tokens_as_token_ids=True))
    C.comp("comp_return_tokens_as_token_ids", [gresp([gch(split, finish="length", logprobs=lp)])],
           completion_request=comp_req(logprobs=1, return_tokens_as_token_ids=True))
    plp = [None, *({str(t): {"logprob": -0.5, "rank": 1, "decoded_token": None},
                    str(byte_id(0x80 + i)): {"logprob": -3.0, "rank": 2, "decoded_token": None}}
                   for i, t in enumerate(split[1:]))]
    C.chat("chat_prompt_logprobs_decoded_null", gresp([gch([*enc("x"), EOS])], prompt_token_ids=split,
                                                        prompt_logprobs=plp))
    C.comp("comp_prompt_logprobs_decoded_null", [gresp([gch([*enc("x"), EOS])], prompt_logprobs=plp)])
    return C


def streams() -> list[dict]:
    enc, chat_req, comp_req = R.enc, R.chat_req, R.comp_req
    en, zh, emoji = enc(R.TEXTS["english"]), enc(R.TEXTS["chinese"]), enc(R.TEXTS["emoji"])
    special = [*enc("a"), BOS, *enc(" b"), THINK, *enc("c 東"), INST, EOS]
    prompt = enc(R.PROMPT_TEXT)
    chat = lambda **kw: {"chat_request": chat_req(**kw)}  # noqa: E731
    comp = lambda **kw: {"completion_request": comp_req(**kw)}  # noqa: E731
    return [
        S.stream("chat_english_1", CHAT, en, size=1),
        S.stream("chat_english_3_seeded", CHAT, en, size=3, base={**chat(), "prompt_token_ids": prompt}),
        S.stream("chat_chinese_1", CHAT, zh[:40], size=1, base=chat()),
        S.stream("chat_emoji_random", CHAT, emoji, size=None, base=chat()),
        S.stream("chat_logprobs_top2_1", CHAT, zh[:20], size=1, top=2, base=chat(logprobs=True, top_logprobs=2)),
        S.stream("chat_special_skip_1", CHAT, special, size=1, base=chat()),
        S.stream("chat_special_keep_2", CHAT, special, size=2, base=chat(skip_special_tokens=False)),
        S.stream("comp_chinese_random", COMP, zh[:40], size=None),
        S.stream("comp_logprobs_1", COMP, emoji[:30], size=1, top=2, base=comp(logprobs=1)),
        S.stream("comp_special_logprobs_3", COMP, special, size=3, top=1, base=comp(logprobs=0)),
        S.stream("chat_tokens_as_ids_2", CHAT, emoji[:12], size=2, top=2,
                 base=chat(logprobs=True, top_logprobs=2, return_tokens_as_token_ids=True)),
        S.stream("comp_tokens_as_ids_1", COMP, zh[:12], size=1, top=1,
                 base=comp(logprobs=1, return_tokens_as_token_ids=True)),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vllm", default=os.path.join(os.path.dirname(sys.executable), "vllm"))
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--model-dir", default=None, help="where to write the model folder (default: a temp dir)")
    ap.add_argument("--port", type=int, default=None, help="use a render server already serving the model folder")
    ap.add_argument("--gz", action="store_true", help="write the .jsonl files gzipped (the v0.34/ fixtures)")
    args = ap.parse_args()
    model = write_model_dir(args.model_dir or tempfile.mkdtemp(prefix="llama_fixture_model_"))
    R.TOK = Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
    assert R.TOK.get_vocab_size() == VOCAB_SIZE
    R.MODEL_NAME = MODEL_NAME
    R.CONFIGS["llama"] = []
    # The stream recorder builds logprobs with record_vllm's DeepSeek-sized
    # candidate ids; use this vocabulary's instead.
    S.logprobs_for = make_logprobs
    proc = None
    if args.port is None:
        log_dir = tempfile.mkdtemp(prefix="derender_llama_golden_")
        proc, port, log_path, _ = R.start_server(args.vllm, model, "llama", log_dir)
        print(f"server up (log {log_path})", flush=True)
    else:
        port = args.port
    try:
        C = build_cases()
        lines, statuses = [], {}
        for case in C.items:
            status, data = R.send(port, case)
            case.pop("_body")
            case["status"] = status
            case["response"] = json.loads(data.decode("utf-8"))
            statuses[status] = statuses.get(status, 0) + 1
            lines.append(json.dumps(case, ensure_ascii=False, allow_nan=False))
        played = [S.play(port, s) | {"config": "llama"} for s in streams()]
    finally:
        if proc is not None:
            R.stop_server(proc)
    gz = ".gz" if args.gz else ""
    R.write_lines(os.path.join(args.out, f"cases_llama.jsonl{gz}"), lines)
    R.write_lines(os.path.join(args.out, f"streams_llama.jsonl{gz}"),
                  [json.dumps(s, ensure_ascii=False, allow_nan=False) for s in played])
    meta_path = os.path.join(args.out, "meta.json")
    meta = {}
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
    with open(os.path.join(model, "tokenizer.json"), "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    meta.setdefault("configs", {})["llama"] = {
        "cases": len(lines), "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "streams": len(played), "file": f"cases_llama.jsonl{gz}", "served_model_name": MODEL_NAME,
        "tokenizer_json_sha256": sha, "vocab_size": VOCAB_SIZE,
        "server_argv": ["vllm", "launch", "render", "--model", "<llama model dir>", "--served-model-name", MODEL_NAME,
                        "--host", "127.0.0.1", "--port", "<port>", "--max-model-len", str(R.MAX_MODEL_LEN)],
    }
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"{len(lines)} cases {dict(sorted(statuses.items()))}; {len(played)} streams, "
          f"{sum(len(s['responses']) for s in played)} chunks", flush=True)


if __name__ == "__main__":
    main()
