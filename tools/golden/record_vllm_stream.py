#!/usr/bin/env python3
"""Record streaming derender fixtures from a real vLLM render server (0.33, 0.34).

    /work/peer/v034/bin/python tools/golden/record_vllm_stream.py --model MODEL --out tests/golden/v0.34 --gz

For each server config (`plain`, `r1_hermes`, `v4`; the flags of
record_vllm.py) it starts `vllm launch render`, plays every stream of that
config the way a client does (one request per generate SSE chunk, carrying
the `stream_state` vLLM returned) and writes `streams_<config>.jsonl`: one
stream per line, `{"name", "config", "path", "base", "chunks", "responses"}`
where `base` holds the request fields sent with every chunk, `chunks` the
generate chunks and `responses` vLLM's `{"status", "body"}` per chunk. A
stream stops at the first non-200 answer. Deterministic like record_vllm.py
(random choices seeded by the stream name); imports only its helpers and
`tokenizers`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import record_vllm as R
from tokenizers import Tokenizer

CHAT, COMP = R.CHAT, R.COMP


def cut(ids: list[int], size: int | None, rng) -> list[list[int]]:
    """Chunks of `size` tokens, or random sizes 1..5 when None."""
    out, i = [], 0
    while i < len(ids):
        n = size or rng.randint(1, 5)
        out.append(ids[i : i + n])
        i += n
    return out


def logprobs_for(rng, ids: list[int], k: int) -> dict:
    return R.make_logprobs(rng, ids, k)


def stream(name: str, path: str, ids: list[int], *, size: int | None = 1, base: dict | None = None,
           finish: str = "stop", stop_reason=None, top: int | None = None, empty_final: bool = False,
           usage: bool = False, usage_first: bool = False, prompt_ids: list[int] | None = None,
           extra_choice: bool = False) -> dict:
    rng = R.rng_for(name)
    lp = logprobs_for(rng, ids, top)["content"] if top is not None else None
    chunks, at = [], 0
    for part in cut(ids, size, rng):
        choice = {"index": 0, "token_ids": part, "finish_reason": None}
        if lp is not None:
            choice["logprobs"] = {"content": lp[at : at + len(part)]}
        at += len(part)
        chunks.append({"request_id": f"s-{name}", "choices": [choice]})
    if extra_choice:
        chunks[0]["choices"].append({"index": 1, "token_ids": ids[:1], "finish_reason": None})
    if empty_final:
        chunks.append({"request_id": f"s-{name}", "choices": [{"index": 0, "token_ids": [], "finish_reason": None}]})
    chunks[-1]["choices"][0]["finish_reason"] = finish
    chunks[-1]["choices"][0]["stop_reason"] = stop_reason
    if prompt_ids is not None:
        chunks[0]["prompt_token_ids"] = prompt_ids
    n = len(ids)
    usage_chunk = {"request_id": f"s-{name}", "choices": [],
                   "usage": {"prompt_tokens": 9, "completion_tokens": n, "total_tokens": 9 + n}}
    if usage_first:
        chunks.insert(0, {**usage_chunk, "usage": {"prompt_tokens": 9, "completion_tokens": 0, "total_tokens": 9}})
    if usage:
        chunks.append(usage_chunk)
    return {"name": name, "path": path, "base": base or {}, "chunks": chunks}


def plain_streams() -> list[dict]:
    T = R.TEXTS
    en, zh, emoji = R.enc(T["english"]), R.enc(T["chinese"]), R.enc(T["emoji"])
    mixed = R.enc("Hi ") + R.enc("東京")[:1] + [R.enc(c)[0] for c in ["é"]] + R.enc(" 🚀 done")
    special = [*R.enc("a"), R.BOS, *R.enc(" b"), R.THINK, *R.enc("c"), R.EOS]
    prompt = R.enc(R.PROMPT_TEXT)
    chat = lambda **kw: {"chat_request": R.chat_req(**kw)}  # noqa: E731
    comp = lambda **kw: {"completion_request": R.comp_req(**kw)}  # noqa: E731
    return [
        stream("chat_english_1", CHAT, en, size=1),
        stream("chat_english_4_request", CHAT, en, size=4, base=chat()),
        stream("chat_chinese_1", CHAT, zh, size=1, base=chat()),
        stream("chat_emoji_random", CHAT, emoji, size=None, base=chat()),
        stream("chat_emoji_1", CHAT, emoji, size=1),
        stream("chat_mixed_split_1", CHAT, mixed, size=1, base=chat()),
        stream("chat_logprobs_top3_2", CHAT, en[:30], size=2, top=3, base=chat(logprobs=True, top_logprobs=3)),
        stream("chat_logprobs_emoji_1", CHAT, emoji[:25], size=1, top=2, base=chat(logprobs=True, top_logprobs=2)),
        stream("chat_logprobs_no_request_3", CHAT, zh[:20], size=3, top=2),
        stream("chat_special_skip_1", CHAT, special, size=1, base=chat()),
        stream("chat_special_keep_1", CHAT, special, size=1, base=chat(skip_special_tokens=False)),
        stream("chat_eos_empty_final_usage", CHAT, [*en[:12], R.EOS], size=3, base=chat(), empty_final=True,
               usage=True),
        stream("chat_usage_first", CHAT, en[:8], size=2, base=chat(), usage_first=True, usage=True),
        stream("chat_prompt_seed_2", CHAT, en[:10], size=2, base={**chat(), "prompt_token_ids": prompt,
                                                                 "prompt_tokens": len(prompt)}),
        stream("chat_length_cut_mid_char", CHAT, mixed[:5], size=1, finish="length"),
        stream("chat_return_token_ids_3", CHAT, en[:9], size=3, base=chat(return_token_ids=True),
               prompt_ids=prompt),
        stream("comp_english_1", COMP, en[:40], size=1, base=comp()),
        stream("comp_chinese_random", COMP, zh, size=None),
        stream("comp_logprobs_top2_1", COMP, mixed, size=1, top=3, base=comp(logprobs=2)),
        stream("comp_logprobs_special_3", COMP, special, size=3, top=2, base=comp(logprobs=1)),
        stream("comp_eos_usage", COMP, [*en[:12], R.EOS], size=4, base=comp(), usage=True),
        stream("err_chat_two_choices", CHAT, en[:4], size=2, extra_choice=True),
        stream("err_comp_two_choices", COMP, en[:4], size=2, extra_choice=True),
        stream("err_chat_stop_strings", CHAT, en[:4], size=2, base=chat(stop=["fox"])),
        stream("err_comp_stop_strings", COMP, en[:4], size=2, base=comp(stop="fox")),
        # what 0.34 changed (issue 34)
        stream("chat_tokens_as_ids_2", CHAT, emoji[:12], size=2, top=2,
               base=chat(logprobs=True, top_logprobs=2, return_tokens_as_token_ids=True)),
        stream("comp_tokens_as_ids_3", COMP, emoji[:12], size=3, top=2,
               base=comp(logprobs=1, return_tokens_as_token_ids=True)),
        stream("chat_usage_without_prompt_tokens", CHAT, en[:6], size=3, base=chat(), usage=True),
        stream("chat_tools_empty_2", CHAT, en[:6], size=2, base=chat(tools=[], tool_choice="required")),
        stream("chat_stop_empty_string_1", CHAT, en[:5], size=1, base=chat(stop="")),
    ]


def parser_streams(config: str) -> list[dict]:
    prompt = R.enc(R.PROMPT_TEXT)
    base = {"chat_request": R.chat_req(), "prompt_token_ids": prompt}
    tools = {"chat_request": R.chat_req(tools=[{"type": "function", "function": {
        "name": "get_weather", "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"}}}}}]), "prompt_token_ids": prompt}
    think = R.think_ids("Let me think about it.", "The answer is 42.")
    if config == "r1_hermes":
        call = R.enc_parts("<tool_call>", '\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n',
                           "</tool_call>")
        calls = R.think_ids("Need the weather.", "") [:-1] + call + [R.EOS]
    else:
        call = R.enc(R.dsml_block(R.dsml_invoke("get_weather", [("city", "true", "Paris"), ("days", "false", "3")])))
        calls = R.think_ids("Need the weather.", "")[:-1] + call + [R.EOS]
    if config == "v4_reasoning":
        reopen = [R.THINK, *R.enc("first"), R.END_THINK, *R.enc(" mid "), R.THINK, *R.enc("second"),
                  R.END_THINK, *R.enc(" final"), R.EOS]
        return [
            stream(f"{config}_think_1", CHAT, think, size=1, base=base),
            stream(f"{config}_reopen_1", CHAT, reopen, size=1, base=base),
            stream(f"{config}_reopen_3", CHAT, reopen, size=3, base=base),
            stream(f"{config}_dsml_text_2", CHAT, [*R.enc(R.DSML_ONE), R.EOS], size=2, base=tools),
        ]
    long_value = "一个很长的城市名, with spaces, \"quotes\" and more text to stream piece by piece"
    long_call = R.enc(R.dsml_block(R.dsml_invoke("get_weather", [("city", "true", long_value), ("days", "false", "3"),
                                                                 ("note", "true", "短")])))
    extra = [] if config != "v4" else [
        stream(f"{config}_tool_long_string_1", CHAT, [*long_call, R.EOS], size=1, base=tools),
        stream(f"{config}_tool_long_string_4", CHAT, [*long_call, R.EOS], size=4, base=tools),
    ]
    tools_empty = {"chat_request": R.chat_req(tools=[], tool_choice="auto"), "prompt_token_ids": prompt}
    return [*extra,
        stream(f"{config}_tools_empty_1", CHAT, calls, size=3, base=tools_empty),
        stream(f"{config}_think_1", CHAT, think, size=1, base=base),
        stream(f"{config}_think_3", CHAT, think, size=3, base=base),
        stream(f"{config}_tool_1", CHAT, calls, size=1, base=tools),
        stream(f"{config}_tool_random", CHAT, calls, size=None, base=tools),
        stream(f"err_{config}_no_prompt_ids", CHAT, think, size=4, base={"chat_request": R.chat_req()}),
        stream(f"err_{config}_no_chat_request", CHAT, think, size=4, base={"prompt_token_ids": prompt}),
    ]


def play(port: int, s: dict) -> dict:
    state, responses = None, []
    for gen in s["chunks"]:
        body = {**s["base"], "stream": True, "model": R.MODEL_NAME, "generate_chunk": gen}
        if state is not None:
            body["stream_state"] = state
        status, data = R.send(port, {"path": s["path"], "_body": json.dumps(body, ensure_ascii=False).encode()})
        response = json.loads(data)
        responses.append({"status": status, "body": response})
        if status != 200:
            break
        state = response["stream_state"]
    return {**s, "responses": responses}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="plain,r1_hermes,v4,v4_reasoning")
    ap.add_argument("--model", default="/work/peer/model")
    ap.add_argument("--vllm", default=os.path.join(os.path.dirname(sys.executable), "vllm"))
    ap.add_argument("--out", default=R.HERE)
    ap.add_argument("--gz", action="store_true", help="write streams_<config>.jsonl.gz (the v0.34/ fixtures)")
    args = ap.parse_args()
    R.TOK = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    log_dir = tempfile.mkdtemp(prefix="derender_stream_golden_")
    for config in args.configs.split(","):
        streams = plain_streams() if config == "plain" else parser_streams(config)
        t0 = time.time()
        proc, port, log_path, _ = R.start_server(args.vllm, args.model, config, log_dir)
        print(f"[{config}] server up in {time.time() - t0:.1f}s (log {log_path})", flush=True)
        try:
            played = [play(port, s) | {"config": config} for s in streams]
        finally:
            R.stop_server(proc)
        R.write_lines(os.path.join(args.out, f"streams_{config}.jsonl" + (".gz" if args.gz else "")),
                      [json.dumps(s, ensure_ascii=False, allow_nan=False) for s in played])
        print(f"[{config}] {len(played)} streams, {sum(len(s['responses']) for s in played)} chunks", flush=True)


if __name__ == "__main__":
    main()
