"""vLLM 0.34's answers for a family's parser cases, computed in process the
way its render server computes them (``OnlineDerenderer._derender_chat`` and,
chunk by chunk carrying its state, ``_derender_chat_stream_parsed``).

Run with the reference virtualenv, not the project's::

    CUDA_VISIBLE_DEVICES= VLLM_TARGET_DEVICE=cpu /work/peer/v034/bin/python \\
        tests/golden/parsers/vllm_family.py --family qwen3 --seed 1 -n 200 --out FILE.jsonl.gz [--server-check 40]

One JSON line per case: its inputs (token ids, prompt ids, request, finish,
stream chunk sizes) and, per parser pair, vLLM's non-streaming message
(``whole``) and its stream folded (``stream``).  Tool call ids are random in
vLLM, so only names and arguments are kept.  Imports nothing of the project.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import family_cases as case_gen
import family_tokens


def pair_key(pair: tuple[str | None, str | None]) -> str:
    return f"{pair[0] or '-'}+{pair[1] or '-'}"


def build_derenderers(model_dir: Path, pairs: list[tuple[str | None, str | None]]) -> tuple[Any, dict[str, Any]]:
    from vllm import AsyncEngineArgs, envs
    from vllm.config import VllmConfig
    from vllm.renderers import renderer_from_config
    from vllm.renderers.online_derenderer import OnlineDerenderer

    args = AsyncEngineArgs(model=str(model_dir), tokenizer=str(model_dir), max_model_len=8192)
    mc = args.create_model_config()
    envs.VLLM_CPU_KVCACHE_SPACE = 0
    vc = VllmConfig(model_config=mc, logging_config=args.create_logging_config(),
                    structured_outputs_config=args.create_structured_outputs_config())
    renderer = renderer_from_config(vc)
    out = {}
    for r, t in pairs:
        out[pair_key((r, t))] = OnlineDerenderer(
            model_config=mc, renderer=renderer, request_logger=None, chat_template=None,
            chat_template_content_format="auto", enable_auto_tools=True, tool_parser=t, reasoning_parser=r,
        )
    return renderer.get_tokenizer(), out


def encode(tok: Any, pieces: list[Any]) -> list[int]:
    ids: list[int] = []
    for piece in pieces:
        if isinstance(piece, str):
            ids += tok.encode(piece, add_special_tokens=False) if piece else []
        else:  # ["spell", s]: a marker out of ordinary tokens
            text = piece[1]
            ids += tok.encode(text[:1], add_special_tokens=False) + tok.encode(text[1:], add_special_tokens=False)
    return ids


def summary(message: Any) -> dict[str, Any]:
    calls = [[c.function.name, c.function.arguments] for c in (message.tool_calls or [])]
    return {"reasoning": message.reasoning, "content": message.content, "calls": calls}


def whole(der: Any, case: dict[str, Any], request: Any) -> dict[str, Any]:
    from vllm.entrypoints.scale_out.token_in_token_out.protocol import GenerateTokensChoice, GenerateTokensResponse

    gen = GenerateTokensResponse(
        request_id="r", model="m", prompt_token_ids=case["prompt_ids"],
        choices=[GenerateTokensChoice(index=0, finish_reason=case["finish"], stop_reason=None, token_ids=case["ids"])],
    )
    try:
        choices, _ = der._derender_chat(gen, request, case["prompt_ids"])
    except Exception as exc:  # vLLM answers 400/500 here
        return {"error": type(exc).__name__}
    return summary(choices[0].message) | {"finish_reason": choices[0].finish_reason}


def stream(der: Any, case: dict[str, Any], request: Any) -> dict[str, Any]:
    from vllm.entrypoints.scale_out.token_in_token_out.protocol import (
        DerenderStreamState,
        GenerateTokensStreamChoice,
        GenerateTokensStreamResponse,
    )

    state = DerenderStreamState()
    out: dict[str, Any] = {"reasoning": None, "content": None, "calls": [], "finish_reason": None}
    start = 0
    lens = case["chunks"]
    for i, n in enumerate(lens):
        last = i == len(lens) - 1
        choice = GenerateTokensStreamChoice(index=0, token_ids=case["ids"][start : start + n],
                                            finish_reason=case["finish"] if last else None)
        start += n
        chunk = GenerateTokensStreamResponse(request_id="r", model="m", choices=[choice],
                                             prompt_token_ids=case["prompt_ids"] if i == 0 else None)
        try:
            resp, state = der._derender_chat_stream_parsed(der.parser, "m", chunk, state, request, None,
                                                           case["prompt_ids"])
        except Exception as exc:
            return {"error": type(exc).__name__}
        for ch in resp.choices:
            fold(out, ch.delta)
            out["finish_reason"] = ch.finish_reason or out["finish_reason"]
    return out


def fold(out: dict[str, Any], delta: Any) -> None:
    for name in ("reasoning", "content"):
        value = getattr(delta, name)
        if value is not None:
            out[name] = (out[name] or "") + value
    for tc in delta.tool_calls or []:
        while len(out["calls"]) <= tc.index:
            out["calls"].append(["", ""])
        function = tc.function
        if function is not None:
            out["calls"][tc.index][0] += function.name or ""
            out["calls"][tc.index][1] += function.arguments or ""


def server_check(model_dir: Path, pairs: list[tuple[str | None, str | None]], cases: list[dict[str, Any]],
                 n: int, log_dir: str) -> int:
    """Send the first ``n`` cases to vLLM's HTTP render server, one server per
    pair (``vllm launch render``, tools/golden/record_vllm.py's helpers), and
    count answers that differ from the in-process ones: the harness check."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import record_vllm

    bad = 0
    for pair in pairs:
        key = pair_key(pair)
        flags = [f for name, value in zip(("--reasoning-parser", "--tool-call-parser"), pair, strict=True)
                 if value for f in (name, value)]
        record_vllm.CONFIGS[key] = [*flags, "--enable-auto-tool-choice"] if pair[1] else flags
        vllm_bin = str(Path(sys.executable).with_name("vllm"))
        proc, port, _, _ = record_vllm.start_server(vllm_bin, str(model_dir), key, log_dir)
        try:
            for case in cases[:n]:
                request = {"messages": [{"role": "user", "content": "weather?"}], "model": "m", **case["request"]}
                gen = {"request_id": "r", "prompt_token_ids": case["prompt_ids"], "choices": [
                    {"index": 0, "token_ids": case["ids"], "finish_reason": case["finish"]}]}
                body = {"model": record_vllm.MODEL_NAME, "chat_request": request, "generate_response": gen,
                        "prompt_token_ids": case["prompt_ids"]}
                status, data = record_vllm.send(port, {"path": "/v1/chat/completions/derender",
                                                       "_body": json.dumps(body).encode()})
                choice = json.loads(data)["choices"][0]
                message = choice["message"]
                got = {"reasoning": message.get("reasoning"), "content": message.get("content"),
                       "calls": [[c["function"]["name"], c["function"]["arguments"]]
                                 for c in message.get("tool_calls") or []],
                       "finish_reason": choice["finish_reason"]}
                if status != 200 or got != case["results"][key]["whole"]:
                    bad += 1
                    print("server differs", key, case["id"], got, case["results"][key]["whole"])
        finally:
            record_vllm.stop_server(proc)
        print(f"{key}: {min(n, len(cases))} cases over HTTP", flush=True)
    return bad


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--server-check", type=int, default=0, metavar="N",
                    help="also send the first N cases to the HTTP render server (one per pair) and compare")
    args = ap.parse_args()

    import vllm
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    logging.disable(logging.CRITICAL)
    mod = case_gen.family_module(args.family)
    tmp = tempfile.TemporaryDirectory()
    model_dir = family_tokens.build(args.family, Path(tmp.name) / "model")
    tok, ders = build_derenderers(model_dir, mod.PAIRS)
    rows = []
    for case in case_gen.build(args.family, args.seed, args.n):
        case["ids"] = encode(tok, case["pieces"]) + ([tok.eos_token_id] if case["finish"] == "stop" else [])
        if not case["ids"]:
            case["ids"] = [tok.eos_token_id] if case["finish"] == "stop" else encode(tok, ["."])
        case["prompt_ids"] = encode(tok, [case["prompt"]])
        case["chunks"] = case_gen.chunk_lens(len(case["ids"]), case["chunk_seed"])
        body = {"messages": [{"role": "user", "content": "weather?"}], "model": "m", **case["request"]}
        request = ChatCompletionRequest.model_validate(body)
        case["results"] = {key: {"whole": whole(der, case, request), "stream": stream(der, case, request)}
                           for key, der in ders.items()}
        rows.append(case)
    meta = {"meta": {"vllm": vllm.__version__, "family": args.family, "seed": args.seed, "n": args.n,
                     "pairs": [pair_key(p) for p in mod.PAIRS], "eos": tok.eos_token_id}}
    with gzip.open(args.out, "wt", encoding="utf-8") as f:
        for row in [meta, *rows]:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(rows)} cases x {len(ders)} pairs -> {args.out}")
    if args.server_check:
        bad = server_check(model_dir, mod.PAIRS, rows, args.server_check, tmp.name)
        print(f"HTTP render server: {bad} answers differ from the in-process ones")
    tmp.cleanup()


if __name__ == "__main__":
    main()
