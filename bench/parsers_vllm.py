"""Parsed streaming against vLLM 0.34's stateless derender, family by family.

    python bench/parsers_vllm.py --vllm /work/peer/v034 [--families qwen3 ...] [--tokens 4000] [--reps 3]

Issue 35's target: a 4000-token output with reasoning and 3 tool calls
(`<think>` reasoning `</think>`, "\\n\\n", content, the family's tool call
three times, EOS; tests/golden/parsers/cases_<family>.py's BENCH and test
tokenizer), in process, on both sides:

- streamed in 1-token chunks, each with the state the chunk before returned:
  ours through `Derenderer.derender` on request bytes (JSON in and out, the
  signed state spliced in), vLLM's `_derender_chat_stream_parsed` on request
  objects built beforehand (its JSON parsing not counted: a conservative
  comparison for us), which replays every output id so far through its
  parsers each chunk;
- non-streaming: ours on the request bytes, vLLM's `_derender_chat`.

Both sides run in the same run (vLLM in its virtualenv, a subprocess per
family, after ours), CPU ms as medians of `--reps` runs (vLLM's stream once:
it is quadratic), and the folded stream of each side is checked against its
own non-streaming answer and ours against vLLM's. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# bench/queue.py shadows the stdlib `queue` (which vLLM's and redis's imports need).
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
PARSERS = ROOT / "tests" / "golden" / "parsers"
THINK, END_THINK = "<think>", "</think>"
CALLS = 3
TOOLS = [{"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {
    "query": {"type": "string"}, "k": {"type": "integer"}, "city": {"type": "string"}}}}}
    for name in ("search", "get_weather")]  # fmt: skip


def cpu_ms(fn: Any) -> float:
    start = time.process_time()
    fn()
    return (time.process_time() - start) * 1000


def output_ids(vocab: Any, family: str, n_tokens: int) -> list[int]:
    """Reasoning, content and the family's call three times, `n_tokens` ids in all (EOS last)."""
    sys.path[:0] = [str(PARSERS)]
    from family_cases import family_module

    def enc(text: str) -> list[int]:
        return list(vocab.tokenizer.encode(text, add_special_tokens=False).ids)

    sys.path.append(str(ROOT / "bench"))
    from bodies import corpus_ids  # prose, CJK, emoji, Python source: no parser markup

    corpus = corpus_ids(vocab.tokenizer, n_tokens)
    call = enc(family_module(family).BENCH[2] + "\n") * CALLS
    head, sep, nl = enc(THINK), enc(END_THINK), enc("\n\n")
    free = n_tokens - len(call) - len(head) - len(sep) - len(nl) - 1
    half = free // 2
    text = corpus[:free]
    return [*head, *text[:half], *sep, *nl, *text[half:], *call, vocab.eos_token_id]


# ---- vLLM's side (runs in the reference virtualenv) ----

def vllm_side(family: str, model_dir: str, ids_file: str, reps: int) -> None:
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    sys.path[:0] = [str(PARSERS)]
    import logging

    import vllm_family as VF
    from family_cases import family_module
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.entrypoints.scale_out.token_in_token_out.protocol import (
        DerenderStreamState,
        GenerateTokensChoice,
        GenerateTokensResponse,
        GenerateTokensStreamChoice,
        GenerateTokensStreamResponse,
    )

    logging.disable(logging.CRITICAL)
    reasoning, tool, _ = family_module(family).BENCH
    _, ders = VF.build_derenderers(Path(model_dir), [(reasoning, tool)])
    der = next(iter(ders.values()))
    ids = json.loads(Path(ids_file).read_text())
    request = ChatCompletionRequest.model_validate(
        {"messages": [{"role": "user", "content": "q"}], "model": "m", "tools": TOOLS})
    gen = GenerateTokensResponse(request_id="r", model="m", prompt_token_ids=[], choices=[
        GenerateTokensChoice(index=0, finish_reason="stop", stop_reason=None, token_ids=ids)])
    whole_ms = statistics.median(cpu_ms(lambda: der._derender_chat(gen, request, [])) for _ in range(reps))
    choices, _ = der._derender_chat(gen, request, [])
    whole = VF.summary(choices[0].message)
    chunks = [GenerateTokensStreamResponse(request_id="r", model="m", prompt_token_ids=[] if i == 0 else None,
                                           choices=[GenerateTokensStreamChoice(
                                               index=0, token_ids=[t], finish_reason="stop" if i == len(ids) - 1
                                               else None)]) for i, t in enumerate(ids)]  # fmt: skip
    folded: dict[str, Any] = {"reasoning": None, "content": None, "calls": []}

    def stream() -> None:
        state = DerenderStreamState()
        for chunk in chunks:
            resp, state = der._derender_chat_stream_parsed(der.parser, "m", chunk, state, request, None, [])
            for ch in resp.choices:
                VF.fold(folded, ch.delta)

    stream_ms = cpu_ms(stream)
    print(json.dumps({"whole_ms": whole_ms, "stream_ms": stream_ms, "whole": whole, "stream": folded}))


# ---- ours ----

def ours(family: str, folder: Path, n_tokens: int, reps: int) -> dict[str, Any]:
    sys.path[:0] = [str(ROOT), str(PARSERS)]
    import family_tokens
    from family_cases import family_module

    from derender_queue.core import Derenderer, ModelConfig, ModelRegistry

    reasoning, tool, _ = family_module(family).BENCH
    model_dir = family_tokens.build(family, folder / family)
    model = ModelConfig(name="m", tokenizer=str(model_dir), reasoning_parser=reasoning, tool_parser=tool)
    derenderer = Derenderer(ModelRegistry((model,)))
    ids = output_ids(derenderer.registry.get("m").vocab, family, n_tokens)
    base = {"model": "m", "chat_request": {"tools": TOOLS}, "prompt_token_ids": []}
    whole_body = json.dumps({**base, "generate_response": {"request_id": "r", "choices": [
        {"index": 0, "token_ids": ids, "finish_reason": "stop"}]}}).encode()
    whole_ms = statistics.median(cpu_ms(lambda: derenderer.derender("chat", whole_body)) for _ in range(reps))
    message = json.loads(derenderer.derender("chat", whole_body).body)["choices"][0]["message"]
    bodies = [json.dumps({"stream": True, **base, "generate_chunk": {"request_id": "r", "choices": [
        {"index": 0, "token_ids": [t], "finish_reason": "stop" if i == len(ids) - 1 else None}]}}).encode()[:-1]
        for i, t in enumerate(ids)]  # fmt: skip
    folded: dict[str, Any] = {"reasoning": None, "content": None, "calls": []}

    def stream(fold: bool) -> None:
        state = b""
        for body in bodies:
            out = derenderer.derender("chat", body + (b',"stream_state":' + state if state else b"") + b"}").body
            state = out.rpartition(b',"stream_state":')[2][:-1]
            if fold:
                _fold(folded, json.loads(out)["chunk"])

    stream(True)
    stream_ms = statistics.median(cpu_ms(lambda: stream(False)) for _ in range(reps))
    calls = [[c["function"]["name"], c["function"]["arguments"]] for c in message.get("tool_calls") or []]
    whole = {"reasoning": message.get("reasoning"), "content": message.get("content"), "calls": calls}
    return {"ids": ids, "model_dir": str(model_dir), "whole_ms": whole_ms, "stream_ms": stream_ms,
            "whole": whole, "stream": folded}


def _fold(out: dict[str, Any], response: dict[str, Any]) -> None:
    for choice in response.get("choices", []):
        delta = choice.get("delta") or {}
        for name in ("reasoning", "content"):
            if delta.get(name) is not None:
                out[name] = (out[name] or "") + delta[name]
        for tc in delta.get("tool_calls") or []:
            while len(out["calls"]) <= tc["index"]:
                out["calls"].append(["", ""])
            function = tc.get("function") or {}
            out["calls"][tc["index"]][0] += function.get("name") or ""
            out["calls"][tc["index"]][1] += function.get("arguments") or ""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm", type=Path, help="vLLM 0.34 reference virtualenv")
    ap.add_argument("--families", nargs="*", default=["qwen3"])
    ap.add_argument("--tokens", type=int, default=4000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--vllm-side", nargs=3, metavar=("FAMILY", "MODEL_DIR", "IDS_FILE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.vllm_side:
        vllm_side(*args.vllm_side, args.reps)
        return
    print(f"{args.tokens}-token output, reasoning + content + {CALLS} tool calls, 1-token chunks; CPU ms, "
          f"medians of {args.reps} (vLLM's stream: one run)\n")
    print("| family (reasoning + tools) | ours stream | vLLM stream | less CPU | ours whole | vLLM whole | "
          "ours / vLLM (whole) | answers |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for family in args.families:
            mine = ours(family, Path(tmp), args.tokens, args.reps)
            ids_file = Path(tmp) / f"{family}.json"
            ids_file.write_text(json.dumps(mine["ids"]))
            done = subprocess.run([str(args.vllm / "bin" / "python"), __file__, "--reps", str(args.reps),
                                   "--vllm-side", family, mine["model_dir"], str(ids_file)],
                                  capture_output=True, text=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
            if done.returncode:
                print(f"| {family} | vLLM failed: {done.stderr.strip().splitlines()[-1:]} |")
                continue
            theirs = json.loads(done.stdout.strip().splitlines()[-1])
            # docs/parsers.md "The rule" (held content): a stream keeps the content's leading whitespace that a
            # later call strips from the non-streaming answer.
            if mine["stream"]["content"] != mine["whole"]["content"]:
                mine["stream"] = {**mine["stream"], "content": (mine["stream"]["content"] or "").lstrip() or None}
            same = "same" if mine["whole"] == theirs["whole"] == mine["stream"] else "DIFFER"
            sys.path[:0] = [str(PARSERS)]
            from family_cases import family_module

            reasoning, tool, _ = family_module(family).BENCH
            print(f"| {family} ({reasoning} + {tool}) | {mine['stream_ms']:.0f} | {theirs['stream_ms']:.0f} | "
                  f"{theirs['stream_ms'] / mine['stream_ms']:.0f}x | {mine['whole_ms']:.1f} | "
                  f"{theirs['whole_ms']:.1f} | {mine['whole_ms'] / theirs['whole_ms']:.2f} | {same} |", flush=True)
            for field in ("reasoning", "content", "calls"):
                if not mine["whole"][field] == mine["stream"][field] == theirs["whole"][field]:
                    print(f"  {family} {field}: ours {mine['whole'][field]!r:.300}, our stream "
                          f"{mine['stream'][field]!r:.300}, vLLM {theirs['whole'][field]!r:.300}", file=sys.stderr)


if __name__ == "__main__":
    main()
