#!/usr/bin/env python3
"""Differential run: random bodies of the hard cases, and random streams in
1-4-token chunks, sent to a vLLM release's render server and (with
--compare) to our derender answering as that release (its compat profile),
compared field by field and chunk by chunk.

    PYTHONPATH=. .venv/bin/python tools/golden/differential.py --vllm VENV/bin/vllm --release 0.34 \
        --model MODEL --compare [--seed S] [-n N] [--streams M]
    ... --save     # rewrite that release's replay fixtures (seed 13)

Families: `plain` (DeepSeek V4 tokenizer, no parsers), `r1_hermes` (the same
with --reasoning-parser deepseek_r1 --tool-call-parser hermes; chat only),
`v4` (deepseek_v4 for both) and `llama` (the Llama-style fixture of
record_llama.py). Bodies mix text ids, pieces of split characters, lone
continuation bytes and special/added ids; stop strings across tokens, "" and
bare strings; min_tokens; n>1; top-0..20 logprobs (never more than
max_logprobs entries); prompt seeding; empty or null token_ids with
logprobs. Streams: differential_streams.py. `--save` keeps the bodies,
streams and vLLM's answers as `diff_<family>.jsonl.gz` and
`diff_streams_<family>.jsonl.gz` in the release's folder (this one for 0.33,
v0.34/); tests/core/test_differential.py replays them with the comparisons in
tests/helpers/differential_compare.py (DIFFERENCES) and tests/helpers/stream_compare.py
(CLASSES), the one place each documented difference is normalised.

Recording imports only the stdlib, `tokenizers` and the recorders beside it;
`--compare` also imports the project (run it with the project's venv).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the recorders beside it
# The goldens (read and written) live with the tests that replay them.
HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests", "golden")

import record_llama as L  # noqa: E402
import record_vllm as R  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

SEED = 13
SNIPPETS = [
    "Hello, world!", "The quick brown fox jumps over the lazy dog.", "def f(x):\n    return x + 1\n",
    "東京タワーは高い。", "深度学习是机器学习的一个分支", "안녕하세요", "naïve café Größe", "🚀👩‍💻🇯🇵 done",
    "1️⃣ 👍🏽 🏳️‍🌈", "a\u0301 e\u0308", "  spaced\ttext\r\n", "{\"k\": [1, 2]}", " ", "x",
]
FAMILIES = {
    "plain": {"model": "deepseek", "served": "deepseek-v4", "flags": []},
    "r1_hermes": {"model": "deepseek", "served": "deepseek-v4", "flags": R.CONFIGS["r1_hermes"]},
    "v4": {"model": "deepseek", "served": "deepseek-v4", "flags": R.CONFIGS["v4"]},
    "llama": {"model": None, "served": L.MODEL_NAME, "flags": []},
}
PARSED = ("r1_hermes", "v4")
RELEASE_DIRS = {"0.33": HERE, "0.34": os.path.join(HERE, "v0.34")}


class Family:
    def __init__(self, name: str, tok: Tokenizer):
        self.name, self.tok = name, tok
        self.size = tok.get_vocab_size(with_added_tokens=True)
        if name == "llama":
            self.specials = [L.UNK, L.BOS, L.EOS, *range(32000, L.VOCAB_SIZE)]
            self.cont = [L.byte_id(b) for b in range(0x80, 0xC0)]
            self.lead = [L.byte_id(b) for b in range(0xC2, 0xF5)]
            self.eos = L.EOS
        else:
            self.specials = [0, 1, 2, 128000, 128799, 128803, 128804, 128821, 128822, 128825, 129279]
            inv = _gpt2_bytes()
            self.cont = [tok.token_to_id(inv[b]) for b in range(0x80, 0xC0)]
            self.lead = [tok.token_to_id(inv[b]) for b in range(0xC2, 0xF5)]
            # ordinary tokens that start with continuation bytes (the 31530, 111821)
            self.cont += [31530, 111821]
            self.eos = 1

    def enc(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False).ids

    def dec(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=False)


def _gpt2_bytes() -> dict[int, str]:
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, extra = {b: chr(b) for b in keep}, 256
    for b in range(256):
        if b not in out:
            out[b] = chr(extra)
            extra += 1
    return out


def random_ids(rng: random.Random, fam: Family) -> list[int]:
    ids: list[int] = []
    for _ in range(rng.randint(1, 4)):
        r = rng.random()
        if r < 0.55:
            ids += fam.enc(rng.choice(SNIPPETS))
        elif r < 0.7:
            ids.append(rng.choice(fam.specials))
        elif r < 0.8:
            ids += [rng.choice(fam.lead), *rng.sample(fam.cont, rng.randint(0, 3))]
        elif r < 0.9:
            ids.append(rng.choice(fam.cont))
        else:
            ids.append(rng.randrange(3, fam.size))
    return ids[:24] or fam.enc("x")


def logprobs(rng: random.Random, fam: Family, ids: list[int], k: int) -> dict:
    content = []
    for tid in ids:
        top = [{"token_id": tid, "logprob": -0.5, "rank": 1}]
        for j in range(k):
            r = rng.random()
            cid = (rng.choice(fam.specials) if r < 0.1 else rng.choice(fam.cont + fam.lead) if r < 0.4
                   else rng.randrange(3, fam.size))
            top.append({"token_id": cid, "logprob": round(-0.6 - j - rng.random(), 4), "rank": j + 2})
        content.append({"token_id": tid, "logprob": -0.5, "rank": 1, "top_logprobs": top[:20]})
    return {"content": content}


def stop_strings(rng: random.Random, fam: Family, ids: list[int]):
    text = fam.dec(ids)
    r = rng.random()
    if r < 0.15:
        return ""
    if r < 0.25:
        return [""]
    piece = ""
    if len(text) > 1:
        a = rng.randrange(len(text))
        piece = text[a : a + rng.randint(1, 4)]
    if r < 0.55:
        return piece or "zz"  # a bare string, usually across tokens
    return [s for s in (piece, rng.choice(["", ",", "。", "o", "zz"])) if s is not None]


def body(rng: random.Random, fam: Family, endpoint: str, i: int) -> dict:
    n = 1 if rng.random() < 0.7 else rng.randint(2, 3)
    want_lp = rng.random() < 0.5
    k = rng.choice([0, 0, 1, 2, 3, 5, 8, 19]) if want_lp else 0
    opts: dict = {}
    if rng.random() < 0.8:
        opts = {"messages": [{"role": "user", "content": "hi"}]} if endpoint == "chat" else {"prompt": "hi"}
        if rng.random() < 0.6:
            opts["stop"] = None  # filled per body below
        if rng.random() < 0.3:
            opts["min_tokens"] = rng.randint(0, 5)
        if rng.random() < 0.2:
            opts["include_stop_str_in_output"] = True
        if rng.random() < 0.3:
            opts["skip_special_tokens"] = rng.random() < 0.5
        if want_lp:
            if endpoint == "chat":
                opts.update(logprobs=True, top_logprobs=rng.randint(0, 20))
            else:
                opts["logprobs"] = rng.randint(0, 19)
    choices = []
    for c in range(n):
        ids = random_ids(rng, fam)
        if rng.random() < 0.3:
            ids = [*ids, fam.eos]
        choice: dict = {"index": c, "token_ids": ids}
        r = rng.random()
        choice["finish_reason"] = "stop" if r < 0.7 else "length" if r < 0.9 else None
        if want_lp:
            choice["logprobs"] = logprobs(rng, fam, ids, k)
        if rng.random() < 0.05:  # vLLM checks empty token_ids before anything about logprobs
            choice["token_ids"] = rng.choice([[], None])
            choice.setdefault("logprobs", logprobs(rng, fam, [fam.enc("x")[0]], 1))
        choices.append(choice)
    if "stop" in opts:
        opts["stop"] = stop_strings(rng, fam, choices[0]["token_ids"] or [])
    gen: dict = {"request_id": f"diff-{i}", "choices": choices}
    if rng.random() < 0.3:
        gen["prompt_token_ids"] = fam.enc(rng.choice(SNIPPETS))
    if endpoint == "chat":
        req = {"generate_response": gen}
        if opts:
            req["chat_request"] = opts
        if fam.name in PARSED:
            req["chat_request"] = opts or {"messages": []}
            req["chat_request"].pop("prompt", None)
        return req
    req = {"generate_responses": [gen]}
    if opts:
        req["completion_request"] = opts
    return req


def bodies(family: str, fam: Family, seed: int, n: int) -> list[dict]:
    out = []
    for i in range(n):
        rng = random.Random(f"{seed}:{family}:{i}")
        endpoint = "chat" if family in PARSED or rng.random() < 0.55 else "completion"
        out.append({"name": f"{family}_{seed}_{i}", "family": family,
                    "path": R.CHAT if endpoint == "chat" else R.COMP, "request": body(rng, fam, endpoint, i)})
    return out


def pinned(family: str) -> list[dict]:
    """The issue's own bodies (DeepSeek ids), kept in every run."""
    if family != "plain":
        return []

    def lp(ids):
        return {"content": [{"token_id": t, "logprob": -0.5, "top_logprobs": [{"token_id": t, "logprob": -0.5}]}
                            for t in ids]}

    hello = [19923, 14, 2058]
    cases = [
        ("chat_stop_bare_empty", R.CHAT, {
            "generate_response": {
                "request_id": "x", "choices": [{"index": 0, "token_ids": hello, "finish_reason": "stop"}]},
            "chat_request": {"messages": [], "stop": ""}}),
        ("comp_stop_bare_empty", R.COMP, {
            "generate_responses": [
                {"request_id": "x", "choices": [{"index": 0, "token_ids": hello, "finish_reason": "stop"}]}],
            "completion_request": {"prompt": "p", "stop": ""}}),
    ]
    for ids in ([1277, 0, 31530], [128825, 1, 111821]):
        cases.append((f"comp_text_offset_orphan_{ids[-1]}", R.COMP, {
            "generate_responses": [{"request_id": "x", "choices": [
                {"index": 0, "token_ids": ids, "finish_reason": "length", "logprobs": lp(ids)}]}],
            "completion_request": {"prompt": "p", "logprobs": 0}}))
    for ids in ([], None):
        tag = "empty" if ids == [] else "null"
        cases.append((f"err_chat_{tag}_token_ids_with_logprobs", R.CHAT, {
            "generate_response": {"request_id": "ID", "choices": [
                {"index": 0, "token_ids": ids, "finish_reason": "stop", "logprobs": lp([19923])}]}}))
        cases.append((f"err_comp_{tag}_token_ids_with_logprobs", R.COMP, {
            "generate_responses": [{"request_id": "ID", "choices": [
                {"index": 0, "token_ids": ids, "finish_reason": "stop", "logprobs": lp([19923])}]}]}))
    return [{"name": f"pinned_{n}", "family": family, "path": p, "request": r} for n, p, r in cases]


def play(port: int, cases: list[dict], served: str) -> None:
    for case in cases:
        case["request"] = {"model": served, **case["request"]}
        case["_body"] = json.dumps(case["request"], ensure_ascii=False).encode()
        status, data = R.send(port, case)
        del case["_body"]
        case["status"], case["response"] = status, json.loads(data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vllm", default=os.path.join(os.path.dirname(sys.executable), "vllm"))
    ap.add_argument("--release", choices=list(RELEASE_DIRS), default="0.34",
                    help="the release --vllm runs: the compat profile compared with, the folder --save writes")
    ap.add_argument("--model", default="/work/peer/model", help="the DeepSeek V4 model folder (make_model_dir.py)")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("-n", type=int, default=150, help="random bodies per family")
    ap.add_argument("--streams", type=int, default=0, help="random streams per family (1-4-token chunks)")
    ap.add_argument("--save", action="store_true", help=f"write diff_<family>.jsonl.gz (seed {SEED} for the fixtures)")
    ap.add_argument("--compare", action="store_true", help="compare with our derender (needs the project on sys.path)")
    args = ap.parse_args()
    import differential_streams as S  # it builds on this module's generators

    log_dir = tempfile.mkdtemp(prefix="derender_differential_")
    llama_dir = L.write_model_dir(os.path.join(log_dir, "llama_model"))
    out_dir = RELEASE_DIRS[args.release]
    totals: dict[str, dict] = {}
    for family in args.families.split(","):
        spec = FAMILIES[family]
        model = args.model if spec["model"] == "deepseek" else llama_dir
        fam = Family(family, Tokenizer.from_file(os.path.join(model, "tokenizer.json")))
        R.TOK = fam.tok  # the recorders' enc() (parsed outputs)
        cases = (pinned(family) + bodies(family, fam, args.seed, args.n)) if args.n else []
        streams = [S.stream_case(family, fam, args.seed, i) for i in range(args.streams)]
        R.MODEL_NAME = spec["served"]
        R.CONFIGS[family] = spec["flags"]
        t0 = time.time()
        proc, port, _log_path, _ = R.start_server(args.vllm, model, family, log_dir)
        try:
            play(port, cases, spec["served"])
            send = functools.partial(_send, port)
            streams = [S.play_stream(send, s, spec["served"]) for s in streams]
        finally:
            R.stop_server(proc)
        statuses: dict[int, int] = {}
        for c in cases:
            statuses[c["status"]] = statuses.get(c["status"], 0) + 1
        chunks = sum(len(s["chunks"]) for s in streams)
        print(f"[{family}] {len(cases)} bodies, {len(streams)} streams ({chunks} chunks) in {time.time() - t0:.0f}s; "
              f"vLLM statuses {statuses}", flush=True)
        for kind, items in (("diff", cases), ("diff_streams", streams)):
            if items:  # the fixtures with --save, else beside the server logs
                path = os.path.join(out_dir if args.save else log_dir, f"{kind}_{family}.jsonl.gz")
                R.write_lines(path, [json.dumps(c, ensure_ascii=False) for c in items])
                print(f"[{family}] saved {path} ({os.path.getsize(path) / 1e6:.2f} MB)")
        if args.compare:
            totals[family] = _compare(family, cases, streams, args.release, llama_dir)
    if args.compare:
        print("totals", json.dumps(totals, sort_keys=True))
        sys.exit(1 if any(t["undocumented"] for t in totals.values()) else 0)


def _send(port: int, path: str, body: dict) -> tuple[int, dict]:
    status, data = R.send(port, {"path": path, "_body": json.dumps(body, ensure_ascii=False).encode()})
    return status, json.loads(data)


def _compare(family: str, cases: list[dict], streams: list[dict], release: str, llama_dir: str) -> dict:
    """Ours against what vLLM answered; prints each undocumented difference."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # the project root
    from tests.helpers import differential_compare as DC
    from tests.helpers import stream_compare as SC

    failures = DC.compare_all(cases, llama_dir=llama_dir, release=release)
    for name, why in failures[:20]:
        print(f"  MISMATCH {name}: {why}")
    names: dict[str, list[str]] = {}
    classes, undocumented = SC.compare_all(streams, llama_dir=llama_dir, release=release, names=names)
    for name in sorted(names):
        if name != "equal":
            print(f"  {name}: {' '.join(names[name][:12])}{' ...' if len(names[name]) > 12 else ''}")
    for name, why in undocumented[:20]:
        print(f"  STREAM MISMATCH {name}: {why}")
    print(f"[{family}] bodies: {len(cases)}, {len(failures)} undocumented; streams: {len(streams)}, "
          f"{len(undocumented)} undocumented; documented classes {json.dumps(classes, sort_keys=True)}", flush=True)
    return {"bodies": len(cases), "streams": len(streams), "classes": classes,
            "undocumented": len(failures) + len(undocumented)}


if __name__ == "__main__":
    main()
