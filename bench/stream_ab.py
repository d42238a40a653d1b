"""1-token streams' CPU per chunk, for two or more checkouts alternated.

    python bench/stream_ab.py CHECKOUT [CHECKOUT ...] [--rounds 3] [--parsed [--plain-too]] [--tools 20]

For each round, each checkout in turn runs in a process of its own (its
code on PYTHONPATH first, this venv): bench/stream.py's 4000-token chat
generation in 1-token chunks, without logprobs and with top-5, each chunk
with the state the one before returned (`stream_once`), median CPU µs per
chunk over five passes after one warm-up pass. Prints each checkout's
median over the rounds and every round's figure. `--parsed` streams with
the reasoning and tool parser (the "deepseek-v4-parsed" model of
deploy/models.example.toml); `--tools N` adds N more tool definitions
(~400 bytes each) to the request's options; `--prompt-tokens N` gives every
chunk a prompt of N ids (a slice of the same text) instead of the 10-id one
(with a parser vLLM asks for the whole prompt on every chunk).
`--plain-too` (with `--parsed`) also streams the plain model's generation,
its passes alternated with the parsed ones in the same process, and prints
the parsed chunk's CPU over the plain chunk's per checkout.

Give it `git worktree add` checkouts of the commits to compare.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve()


def extra_tools(n: int) -> list[dict]:
    return [{"type": "function", "function": {
        "name": f"tool_{i}",
        "description": "Looks things up in the index and returns the best matching passages with their sources. " * 2,
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "what to look for"},
            "k": {"type": "integer", "description": "how many results"}}, "required": ["query"]}}}
        for i in range(n)]


def one_checkout(root: Path, parsed: bool, tools: int, prompt_tokens: int, plain_too: bool) -> dict[str, float]:
    """Runs inside the child process, with `root`'s code importable."""
    # bench/queue.py shadows the stdlib `queue` (which redis imports): bench/ goes last.
    sys.path = [str(root), str(root / "tests")] + [p for p in sys.path if Path(p or ".").resolve() != HERE.parent]
    sys.path.append(str(root / "bench"))
    import stream as bench_stream  # that checkout's bench/stream.py
    from bodies import BodyMaker

    from derender_queue.core import Derenderer, ModelRegistry, read_models_config

    registry = ModelRegistry(read_models_config(root / "deploy" / "models.example.toml"))
    derenderer = Derenderer(registry)
    tokenizer = registry.get(None).vocab.tokenizer
    maker = BodyMaker(tokenizer)
    bench_stream.TOOLS = extra_tools(tools) + bench_stream.TOOLS
    prompt = maker._slice(prompt_tokens) if prompt_tokens else maker.prompt
    out = {}
    for k in (0, 5):
        modes = [parsed, False] if plain_too else [parsed]
        streams = {mode: bench_stream.chunk_bodies(bench_stream.base_for(mode, k, prompt),
                                                   bench_stream.generation(maker, tokenizer, mode, k), 1)
                   for mode in modes}
        cpu: dict[bool, list[float]] = {mode: [] for mode in modes}
        for i in range(6):  # the first pass of each warms up
            for mode, bodies in streams.items():
                _, cpu_ms = bench_stream.timed(lambda chunks=bodies: bench_stream.stream_once(derenderer, chunks))
                if i:
                    cpu[mode].append(cpu_ms * 1000 / len(bodies))
        out[str(k)] = statistics.median(cpu[parsed])
        if plain_too:
            out[f"plain{k}"] = statistics.median(cpu[False])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkouts", type=Path, nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--parsed", action="store_true")
    ap.add_argument("--plain-too", action="store_true")
    ap.add_argument("--tools", type=int, default=0)
    ap.add_argument("--prompt-tokens", type=int, default=0)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one_checkout(args.checkouts[0].resolve(), args.parsed, args.tools, args.prompt_tokens,
                                      args.plain_too)))
        return
    flags = ["--parsed"] * args.parsed + ["--plain-too"] * args.plain_too
    flags += ["--tools", str(args.tools), "--prompt-tokens", str(args.prompt_tokens)]
    seen: dict[Path, dict[str, list[float]]] = {c: {"0": [], "5": [], "plain0": [], "plain5": []}
                                                for c in args.checkouts}
    for _ in range(args.rounds):
        for checkout in args.checkouts:
            proc = subprocess.run([sys.executable, str(HERE), str(checkout), "--one", *flags],
                                  capture_output=True, text=True, check=False, cwd=checkout)
            if proc.returncode != 0:
                sys.exit(f"{checkout} failed:\n{proc.stderr[-3000:]}")
            for k, us in json.loads(proc.stdout.strip().splitlines()[-1]).items():
                seen[checkout][k].append(us)
    case = (f"{'parsed' if args.parsed else 'plain'}{f', {args.tools} more tools' if args.tools else ''}"
            f"{f', {args.prompt_tokens}-id prompt' if args.prompt_tokens else ''}")
    print(f"1-token chunks ({case}), CPU µs per chunk: median of {args.rounds} rounds (each round's figure)\n")
    print("| checkout | no logprobs | top-5 |\n|---|---|---|")
    for checkout, by_k in seen.items():
        cells = [f"{statistics.median(v):.2f} ({', '.join(f'{x:.2f}' for x in v)})" for v in (by_k["0"], by_k["5"])]
        print(f"| {checkout} | {cells[0]} | {cells[1]} |")
    if args.plain_too:
        print("\nthe same rounds' plain chunks (same process, passes alternated), and parsed / plain per round\n")
        print("| checkout | plain no logprobs | plain top-5 | parsed / plain, no logprobs | parsed / plain, top-5 |")
        print("|---|---|---|---|---|")
        for checkout, by_k in seen.items():
            plain = [f"{statistics.median(by_k[f'plain{k}']):.2f}" for k in (0, 5)]
            ratios = [[p / q for p, q in zip(by_k[k], by_k[f"plain{k}"], strict=True)] for k in ("0", "5")]
            cells = [f"{statistics.median(r):.2f}x ({', '.join(f'{x:.2f}' for x in r)})" for r in ratios]
            print(f"| {checkout} | {plain[0]} | {plain[1]} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
