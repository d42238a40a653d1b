"""Where a family's 1-token stream spends its CPU: the parser, the state's transport, the rest.

    python bench/stream_parts.py [--reps 3] FAMILY...

bench/stream.py's generation for each engine family (its `BENCH_OUTPUT` shape, no
logprobs), streamed in 1-token chunks in process, with the CPU time of three parts
summed over the stream: `parse_chunk` (core/stream_parse.py: the parser resumed from
its state, fed, its state taken and compacted), `StateCodec.open` + `seal` (the signed
state in and out: base64, HMAC, msgpack) and the rest (the request's and the answer's
JSON, detokenizing). Also the first and the last 500 chunks' CPU, all and the parser's
alone: for a family that holds its output (docs/parsers.md) the difference is what
grows with the held text. Medians of --reps streams, ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import stream as bench  # bench/stream.py (it sets sys.path up for the rest)

from derender_queue.core import Derenderer, ModelRegistry, read_models_config
from derender_queue.core import stream as core_stream
from derender_queue.core.stream_state import StateCodec

ROOT = Path(__file__).resolve().parent.parent


def timed(owner: Any, name: str, spent: list[int]) -> None:
    """Wrap owner.name: each call's CPU ns appended to `spent`."""
    fn: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            spent.append(time.process_time_ns() - start)

    setattr(owner, name, wrapper)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("families", nargs="+")
    args = ap.parse_args()
    parser_ns: list[int] = []
    state_ns: list[int] = []
    timed(core_stream, "parse_chunk", parser_ns)
    timed(StateCodec, "open", state_ns)
    timed(StateCodec, "seal", state_ns)
    from bodies import BodyMaker

    print(
        "| family | total CPU ms | parser | state open + seal | rest | first / last 500 chunks | "
        "parser: first / last 500 |"
    )
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        configs = read_models_config(ROOT / "deploy" / "models.example.toml")
        registry = ModelRegistry(configs + tuple(bench.family_model(f, Path(folder)) for f in args.families))
        derenderer = Derenderer(registry)
        maker = BodyMaker(registry.get(None).vocab.tokenizer)
        for family in args.families:
            choice = bench.family_generation(maker, registry.get(f"{family}-parsed").vocab.tokenizer, family, 0)
            bodies = bench.chunk_bodies(bench.base_for(family, 0, maker.prompt), choice, 1)
            bench.stream_once(derenderer, bodies)  # warm
            rows = []
            for _ in range(args.reps):
                parser_ns.clear()
                state_ns.clear()
                marks: list[int] = []
                start = time.process_time_ns()
                bench.stream_once(derenderer, bodies, lambda _a, _s, m=marks: m.append(time.process_time_ns()))
                total = time.process_time_ns() - start
                rows.append([total, sum(parser_ns), sum(state_ns), marks[499] - start, marks[-1] - marks[-501],
                             sum(parser_ns[:500]), sum(parser_ns[-500:])])  # fmt: skip
            m = [statistics.median(r[i] for r in rows) / 1e6 for i in range(7)]
            print(f"| {family} | {m[0]:.0f} | {m[1]:.0f} | {m[2]:.0f} | {m[0] - m[1] - m[2]:.0f} | "
                  f"{m[3]:.1f} / {m[4]:.1f} | {m[5]:.1f} / {m[6]:.1f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
