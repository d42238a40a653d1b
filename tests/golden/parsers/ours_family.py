"""Our answers for a family's recorded parser cases, and the comparison with vLLM's.

Each case goes end to end through our ``Derenderer`` (a model whose tokenizer
is the family's test tokenizer and whose parsers are the pair's): the
non-streaming chat derender, and the stream in the recorded 1-4-token chunks
carrying our state.  ``compare`` checks, per pair, that our non-streaming
answer and our folded stream both equal vLLM's non-streaming answer (the
issue's rule), and classifies where vLLM's own stream differs from that.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[2])]  # cases modules; the repo root (tests.helpers)

import family_tokens  # noqa: E402

from derender_queue.core import Derenderer, ModelConfig, ModelRegistry  # noqa: E402
from tests.helpers.stream_support import fold_chat, run_stream, whole  # noqa: E402

FIELDS = ("reasoning", "content", "calls", "finish_reason")


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return rows[0]["meta"], rows[1:]


def derenderers(family: str, pairs: list[str], folder: Path) -> dict[str, Derenderer]:
    """One Derenderer per pair ("reasoning+tool", "-" for none), sharing tables."""
    if not (folder / "tokenizer.json").exists():
        family_tokens.build(family, folder)
    shared: dict[Any, Any] = {}
    out = {}
    for key in pairs:
        r, t = (None if p == "-" else p for p in key.split("+"))
        config = ModelConfig(name="m", tokenizer=str(folder), max_model_len=8192, reasoning_parser=r, tool_parser=t)
        registry = ModelRegistry((config,), preload=False)
        registry._vocabs = shared
        out[key] = Derenderer(registry)
    return out


def ours(der: Derenderer, case: dict[str, Any]) -> dict[str, Any]:
    request = {"messages": [{"role": "user", "content": "weather?"}], "model": "m", **case["request"]}
    base = {"model": "m", "chat_request": request, "prompt_token_ids": case["prompt_ids"]}
    choice = {"index": 0, "token_ids": case["ids"], "finish_reason": case["finish"], "stop_reason": None}
    one = whole(der, "chat", base, choice, prompt_token_ids=case["prompt_ids"])
    message = one["choices"][0]["message"]
    calls = [[c["function"]["name"], c["function"]["arguments"]] for c in message.get("tool_calls") or []]
    answer = {"reasoning": message.get("reasoning"), "content": message["content"], "calls": calls,
              "finish_reason": one["choices"][0]["finish_reason"]}
    cuts, at = [], 0
    for n in case["chunks"]:
        at += n
        cuts.append(at)
    chunks = [{"request_id": "r", "choices": [c]} for c in _split(choice, case["chunks"])]
    chunks[0]["prompt_token_ids"] = case["prompt_ids"]
    folded = fold_chat(run_stream(der, "chat", base, chunks))
    stream = {"reasoning": folded["reasoning"], "content": folded["content"],
              "calls": [list(c) for c in folded["calls"]], "finish_reason": folded["finish_reason"]}
    return {"whole": answer, "stream": stream}


def _split(choice: dict[str, Any], lens: list[int]) -> list[dict[str, Any]]:
    out, start = [], 0
    for i, n in enumerate(lens):
        part: dict[str, Any] = {"index": 0, "token_ids": choice["token_ids"][start : start + n]}
        if i == len(lens) - 1:
            part |= {"finish_reason": choice["finish_reason"], "stop_reason": None}
        out.append(part)
        start += n
    return out


def compare(case: dict[str, Any], key: str, got: dict[str, Any]) -> list[str]:
    """Problems with our answer for one pair (empty: equal to vLLM's rule)."""
    want = case["results"][key]["whole"]
    if "error" in want:
        return []  # vLLM fails (HTTP 4xx/5xx); ours answers: documented, not compared
    problems = [f"whole.{f}" for f in FIELDS if got["whole"][f] != want[f]]
    problems += [f"stream.{f}" for f in FIELDS if got["stream"][f] != want[f] and not _held_content(f, got, want)]
    return problems


def _held_content(field: str, got: dict[str, Any], want: dict[str, Any]) -> bool:
    """The documented exception (docs/parsers.md, "held content"): once a call
    was accepted, the stream keeps the leading whitespace that the non-streaming
    answer strips (a call accepted and later dropped strips too): the streamed
    content is whitespace and then the answer (which itself may start with a
    newline MiniCPM-V's newline recovery made of a ``\\n`` escape)."""
    streamed, content = got["stream"]["content"], want["content"] or ""
    return (field == "content" and isinstance(streamed, str) and streamed[:1].isspace()
            and streamed.endswith(content) and not streamed[: len(streamed) - len(content)].strip()
            and got["whole"]["content"] == want["content"])


def vllm_stream_class(case: dict[str, Any], key: str) -> list[str]:
    """Fields where vLLM's own stream, folded, differs from its non-streaming answer."""
    r = case["results"][key]
    if "error" in r["whole"] or "error" in r["stream"]:
        return ["error"]
    return [f for f in FIELDS if r["stream"][f] != r["whole"][f]]


def main() -> None:
    import argparse
    import tempfile

    ap = argparse.ArgumentParser()
    ap.add_argument("fixture", type=Path)
    ap.add_argument("--show", type=int, default=5)
    args = ap.parse_args()
    meta, cases = load(args.fixture)
    with tempfile.TemporaryDirectory() as tmp:
        ders = derenderers(meta["family"], meta["pairs"], Path(tmp))
        report(meta, cases, ders, args.show)


def report(meta: dict[str, Any], cases: list[dict[str, Any]], ders: dict[str, Derenderer], show: int) -> int:
    ours_bad: Counter[str] = Counter()
    theirs: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    shown = 0
    for case in cases:
        for key, der in ders.items():
            if "error" in case["results"][key]["whole"]:
                errors[key] += 1
            for field in vllm_stream_class(case, key):
                theirs[f"{key} {field}"] += 1
            problems = compare(case, key, ours(der, case))
            for p in problems:
                ours_bad[f"{key} {p}"] += 1
            if problems and shown < show:
                shown += 1
                print("DIFF", case["id"], key, problems, json.dumps(case["pieces"], ensure_ascii=False)[:300])
                print("   request", json.dumps(case["request"])[:160], "prompt", case["prompt"][-30:].encode())
                print("   vllm", case["results"][key]["whole"])
                print("   ours", ours(der, case))
    total = len(cases) * len(ders)
    print(f"{meta['family']} seed {meta['seed']}: {len(cases)} cases x {len(ders)} pairs = {total}; "
          f"our differences {sum(ours_bad.values())}; vLLM errors {dict(errors)}")
    for k, v in sorted(ours_bad.items()):
        print(f"  ours  {k}: {v}")
    for k, v in sorted(theirs.items()):
        print(f"  vLLM stream != vLLM whole  {k}: {v}")
    return sum(ours_bad.values())


if __name__ == "__main__":
    main()
