"""Streaming derender cost beside the non-streaming derender of the same tokens.

    python bench/stream.py [--reps 5] [--queue-chunks 2000] [--no-queue] [--vllm VENV [--vllm-reps 3]]
                           [--families qwen3]

A 4000-token generation (bench/bodies.py's corpus) is streamed in chunks of
1, 4 and 16 tokens, with and without logprobs (top-5), on the plain model
and on `deepseek-v4-parsed` (deploy/models.example.toml: deepseek_v4
reasoning and tool parsers; the output is <think> reasoning </think>,
content, then a DSML tool call), and with `--families` on each engine family's
model (its test tokenizer; the model's own reasoning markers, content framing
and tool call where its case module has a `BENCH_OUTPUT`, else `<think>`
reasoning `</think>`, "\n\n", content, the family's tool call). In process
it reports, per generation, the median wall and CPU ms of all chunk calls
(state spliced in as bytes, as the SSE route does; no client-side JSON), the
ratio to the non-streaming call, and the state's size per chunk
(min/median/max bytes of `opaque`, and the one carried into the last chunk:
what the stream held at its end); every case's folded stream is checked
against the non-streaming result once. Each chunk call runs as a worker
runs it, under a Spill (core/parsers/spill.py) whose store is a dict: held
text past a kilobyte leaves the state (`--no-spill`: as an in-process
Derenderer without a store, the state holds it).

The queue part streams 1-token chunks through Redis to a real `derender
worker` process with derender_queue.wire.streaming (one job per chunk) and
reports per-chunk p50/p99, CPU per chunk in each process and summed, and
Redis commands and round trips per chunk (bench/measure.py). It uses one worker process: workers of a stream
must share the signing secret (Derenderer's `stream_secret`).

With `--vllm VENV` (the reference virtualenv of ../shared/vllm-peer/) the
plain 1-token streams, without logprobs and with top-5, also go chunk by chunk
through vLLM 0.33's own streaming derender (bench/vllm_side.py --stream, in a
subprocess of the same run, its `stream_state` carried from answer to
answer); both sides' folded content must agree, and the CPU ratio is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# bench/queue.py shadows the stdlib `queue` (which redis imports): keep
# bench/ off the front of sys.path and look there last.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT)]
sys.path += [str(ROOT / "tests"), str(ROOT / "bench")]

from bodies import BodyMaker  # noqa: E402
from measure import PerJob, per_job, process_tree_cpu, snapshot  # noqa: E402

from derender_queue.core import Derenderer, ModelRegistry, read_models_config  # noqa: E402
from tests.helpers.stream_support import (  # noqa: E402
    TOOL_ID,
    Spilling,
    expected_chat,
    fold_chat,
    generate_chunks,
    run_stream,
    whole,
)

# Families whose tool call ids come from the output (Cohere's tool_call_id), not ours.
OWN_IDS_FAMILIES, OWN_IDS = {"cohere"}, re.compile(r".+")

N_TOKENS = 4000
SIZES = (1, 4, 16)
SEP = b',"stream_state":'
D = "｜DSML｜"
THINK, END_THINK, EOS = 128821, 128822, 1
TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}, "k": {"type": "integer"}}}}}]


def generation(maker: BodyMaker, tokenizer, parsed: bool, k: int) -> dict:
    """One 4000-token choice (with top-k logprobs when k)."""
    if parsed:
        call = tokenizer.encode(
            f'<{D}tool_calls>\n<{D}invoke name="search">\n<{D}parameter name="query" string="true">derender '
            f'streaming</{D}parameter>\n<{D}parameter name="k" string="false">5</{D}parameter>\n</{D}invoke>\n'
            f'</{D}tool_calls>', add_special_tokens=False).ids
        half = (N_TOKENS - len(call) - 3) // 2
        ids = [THINK, *maker._slice(half), END_THINK, *maker._slice(N_TOKENS - len(call) - 3 - half), *call, EOS]
        finish = "stop"
    else:
        ids, finish = maker._slice(N_TOKENS), "length"
    choice = {"index": 0, "token_ids": ids, "finish_reason": finish}
    if k:
        choice["logprobs"] = maker._logprobs(ids, k + 1)  # sampled + top-k
    return choice


# Engine families (--families): their test tokenizers, parsers and tool calls come from
# tests/golden/parsers/cases_<family>.py (TOKENS, BENCH).
sys.path.append(str(ROOT / "tests" / "golden" / "parsers"))


def family_model(family: str, folder: Path):
    """A model served with the family's test tokenizer (tests/golden/parsers/family_tokens.py)."""
    import family_tokens
    from family_cases import family_module

    from derender_queue.core import ModelConfig

    reasoning, tool, _ = family_module(family).BENCH
    return ModelConfig(name=f"{family}-parsed", tokenizer=str(family_tokens.build(family, folder / family)),
                       reasoning_parser=reasoning, tool_parser=tool)


def family_generation(maker: BodyMaker, tokenizer, family: str, k: int) -> dict:
    """The family's own output shape (its case module's `BENCH_OUTPUT`: its reasoning
    markers, content framing and tool call around the REASONING and CONTENT slots),
    else <think> reasoning </think>, "\n\n", content, the family's tool call; then EOS.
    The slots share what the 4000 tokens leave, reasoning first."""
    from family_cases import CONTENT, REASONING, family_module

    module = family_module(family)

    def enc(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False).ids

    shape = getattr(module, "BENCH_OUTPUT", None) or ([THINK], REASONING, [END_THINK], "\n\n", CONTENT,
                                                        module.BENCH[2])
    pieces = [p if p in (REASONING, CONTENT) else p if isinstance(p, list) else enc(p) for p in shape]
    slots = [p for p in pieces if p in (REASONING, CONTENT)]
    free = N_TOKENS - 1 - sum(len(p) for p in pieces if p not in slots)
    ids: list[int] = []
    for piece in pieces:
        if piece in slots:
            n = free // len(slots) if piece is not slots[-1] else free - (len(slots) - 1) * (free // len(slots))
            ids += maker._slice(n)
        else:
            ids += piece
    ids.append(EOS)
    choice = {"index": 0, "token_ids": ids, "finish_reason": "stop"}
    if k:
        choice["logprobs"] = maker._logprobs(ids, k + 1)
    return choice


def base_for(parsed: bool | str, k: int, prompt: list[int]) -> dict:
    """`parsed`: False (plain), True (deepseek-v4-parsed) or an engine family's name."""
    request = {"tools": TOOLS} if parsed else {}
    if k:
        request |= {"logprobs": True, "top_logprobs": k}
    model = f"{parsed}-parsed" if isinstance(parsed, str) else "deepseek-v4-parsed" if parsed else "deepseek-v4"
    return {"model": model, "chat_request": request, "prompt_token_ids": prompt}


def timed(fn) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return (time.perf_counter() - w) * 1000, (time.process_time() - c) * 1000


def chunk_bodies(base: dict, choice: dict, size: int) -> list[bytes]:
    """Request bodies without their state (spliced in per call)."""
    cuts = list(range(size, len(choice["token_ids"]), size))
    return [json.dumps({"stream": True, **base, "generate_chunk": g}).encode()[:-1]
            for g in generate_chunks(choice, cuts)]


def stream_once(derenderer: Any, bodies: list[bytes],
                answered: Callable[[bytes, bytes], None] | None = None) -> None:
    """Every chunk in turn, each with the state the one before returned;
    `answered(answer, state)` sees each answer."""
    state = b""
    for body in bodies:
        out = derenderer.derender("chat", body + (SEP + state if state else b"") + b"}").body
        state = out.rpartition(SEP)[2][:-1]
        if answered is not None:
            answered(out, state)


def held_whitespace(streamed: dict, whole_: dict) -> bool:
    """docs/parsers.md, "held content": with a call accepted, the stream keeps
    the content's leading whitespace (after "</think>\n\n") that the
    non-streaming answer strips; nothing else may differ."""
    content = streamed["content"] or ""
    return bool(streamed["calls"]) and content[:1].isspace() and {**streamed, "content": content.lstrip()} == whole_


def median_pair(samples: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def in_process(reps: int, families: list[str], folder: Path, spill: bool = True) -> list[str]:
    configs = read_models_config(ROOT / "deploy" / "models.example.toml")
    registry = ModelRegistry(configs + tuple(family_model(f, folder) for f in families))
    derenderer: Any = Spilling(Derenderer(registry)) if spill else Derenderer(registry)
    tokenizer = registry.get(None).vocab.tokenizer
    maker = BodyMaker(tokenizer)
    rows = ["| case | chunk | chunks | wall ms | CPU ms | x non-streaming (wall) | state bytes min/median/max/end |",
            "|---|---|---|---|---|---|---|"]
    for parsed in (False, True, *families):
        for k in (0, 5):
            if isinstance(parsed, str):
                choice = family_generation(maker, registry.get(f"{parsed}-parsed").vocab.tokenizer, parsed, k)
            else:
                choice = generation(maker, tokenizer, parsed, k)
            base = base_for(parsed, k, maker.prompt)
            label = f"{parsed}-parsed" if isinstance(parsed, str) else "parsed" if parsed else "plain"
            name = f"{label}, {'top-5' if k else 'no logprobs'}"
            full = {**base, "generate_response": {"request_id": "bench", "choices": [choice]}}
            full_body = json.dumps(full).encode()
            derenderer.derender("chat", full_body)
            w0, c0 = median_pair([timed(lambda body=full_body: derenderer.derender("chat", body)) for _ in range(reps)])
            rows.append(f"| {name} | whole | 1 | {w0:.2f} | {c0:.2f} | 1.0 | - |")
            ids = OWN_IDS if parsed in OWN_IDS_FAMILIES else TOOL_ID
            expected = expected_chat(whole(derenderer, "chat", base, choice, request_id="bench"), ids)
            for size in SIZES:
                check = fold_chat(run_stream(derenderer, "chat", base, generate_chunks(
                    choice, list(range(size, len(choice["token_ids"]), size)), request_id="bench")), ids)
                same = check == expected or held_whitespace(check, expected)
                assert same, f"{name}, chunks of {size}: stream != whole"
                bodies = chunk_bodies(base, choice, size)
                sizes: list[int] = []
                stream_once(derenderer, bodies,
                            lambda _, state, sizes=sizes: sizes.append(len(json.loads(state)["opaque"])))
                w, c = median_pair([timed(lambda chunks=bodies: stream_once(derenderer, chunks)) for _ in range(reps)])
                rows.append(f"| {name} | {size} | {len(bodies)} | {w:.1f} | {c:.1f} | {w / w0:.1f} | "
                            f"{min(sizes)}/{statistics.median(sizes):.0f}/{max(sizes)}/{sizes[-2]} |")
            print(f"  {name}: done", file=sys.stderr, flush=True)
    return rows


async def _queue_latencies(url: str, prefix: str, choice: dict, base: dict,
                           pids: list[int]) -> tuple[list[float], list[float], PerJob]:
    """Per-chunk round trips (ms), CPU us per chunk (client, then each pid's
    tree), and Redis commands and round trips per chunk (INFO, idle rate subtracted)."""
    import redis

    from derender_queue.wire.client import DerenderClient
    from derender_queue.wire.streaming import derender_stream

    chunks = generate_chunks(choice, list(range(1, len(choice["token_ids"]))))

    async def source(items):
        for item in items:
            yield item

    async with DerenderClient(url, key_prefix=prefix) as client:
        async for _ in derender_stream(client, "chat", source(chunks[:100]), request=base):
            pass  # warm-up
        admin = redis.Redis.from_url(url)
        idle_start = snapshot(admin)
        await asyncio.sleep(1.0)
        idle = snapshot(admin) - idle_start
        before = snapshot(admin)
        cpu0 = time.process_time(), *(process_tree_cpu(pid) for pid in pids)
        out, t = [], time.perf_counter()
        async for _ in derender_stream(client, "chat", source(chunks), request=base):
            now = time.perf_counter()
            out.append((now - t) * 1000)
            t = now
        cpu1 = time.process_time(), *(process_tree_cpu(pid) for pid in pids)
        cost = per_job(snapshot(admin) - before, idle, len(out))
    return out, [(b - a) * 1e6 / len(out) for a, b in zip(cpu0, cpu1, strict=False)], cost


def through_queue(n: int) -> list[str]:
    from tests.helpers.redis_process import RedisProcess
    from tests.helpers.stack import Stack

    registry = ModelRegistry(read_models_config(None), preload=False)
    maker = BodyMaker(registry.get(None).vocab.tokenizer)
    choice = {"index": 0, "token_ids": maker._slice(n), "finish_reason": "length"}
    base = {"model": "deepseek-v4", "chat_request": {}}
    with RedisProcess() as redis:
        stack = Stack(redis.url, "benchstream", workers=1).start()
        try:
            pids = [stack.worker_procs[0].pid, redis.proc.pid]
            lat, cpu, cost = asyncio.run(_queue_latencies(redis.url, "benchstream", choice, base, pids))
        finally:
            stack.close()
    q = sorted(lat)
    p99 = q[min(int(len(q) * 0.99), len(q) - 1)]
    return [f"\nthrough Redis, 1 worker process, {len(lat)} chunks of 1 token, sequential (wire.streaming):",
            f"per-chunk round trip p50 {statistics.median(lat):.2f} ms, p99 {p99:.2f} ms",
            f"CPU per chunk: producer {cpu[0]:.0f} us, worker {cpu[1]:.0f} us, redis {cpu[2]:.0f} us "
            f"({sum(cpu):.0f} us over every process)",
            f"Redis per chunk: {cost.report()}"]


def against_vllm(venv: Path, reps: int, prompt_tokens: int = 0) -> list[str]:
    """Our 1-token plain streams beside vLLM's on the same chunk bodies;
    `prompt_tokens`: a prompt of that many ids on every chunk (else 10)."""
    registry = ModelRegistry(read_models_config(None))
    derenderer = Derenderer(registry)
    tokenizer = registry.get(None).vocab.tokenizer
    maker = BodyMaker(tokenizer)
    cases, ours = [], {}
    prompt = maker._slice(prompt_tokens) if prompt_tokens else maker.prompt
    for k in (0, 5):
        name = f"plain, {'top-5' if k else 'no logprobs'}"
        base = base_for(False, k, prompt)
        base["chat_request"]["messages"] = [{"role": "user", "content": "Tell me a story."}]  # vLLM requires it
        bodies = chunk_bodies(base, generation(maker, tokenizer, False, k), 1)
        stream_once(derenderer, bodies)
        ours[name] = median_pair([timed(lambda chunks=bodies: stream_once(derenderer, chunks)) for _ in range(reps)])
        ours[name] += (folded_content(derenderer, bodies),)
        cases.append({"case": name, "reps": reps, "bodies": [b.decode() for b in bodies]})
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as f:
        f.writelines(json.dumps(c) + "\n" for c in cases)
        f.flush()
        proc = subprocess.run([str(venv / "bin" / "python"), str(ROOT / "bench" / "vllm_side.py"), "--stream", f.name],
                              capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"vLLM side failed:\n{proc.stderr[-3000:]}")
    rows = [f"\nagainst vLLM 0.33's streaming derender, {N_TOKENS} chunks of 1 token, a {len(prompt)}-id prompt on "
            f"each, in process, median of {reps} passes (per generation)\n",
            "| case | ours wall ms | ours CPU ms | vLLM wall ms | vLLM CPU ms | vLLM / ours (CPU) |",
            "|---|---|---|---|---|---|"]
    for line in proc.stdout.splitlines():
        row = json.loads(line)
        wall, cpu, content = ours[row["case"]]
        assert row["content"] == content, f"{row['case']}: vLLM's folded content differs from ours"
        their_wall, their_cpu = statistics.median(row["wall_ms"]), statistics.median(row["cpu_ms"])
        rows.append(f"| {row['case']} | {wall:.1f} | {cpu:.1f} | {their_wall:.0f} | {their_cpu:.0f} | "
                    f"{their_cpu / cpu:.1f}x |")
    return rows


def folded_content(derenderer: Derenderer, bodies: list[bytes]) -> str:
    parts: list[str] = []
    stream_once(derenderer, bodies, lambda out, _: parts.extend(
        c["delta"].get("content") or "" for c in json.loads(out)["chunk"]["choices"]))
    return "".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--queue-chunks", type=int, default=2000)
    ap.add_argument("--no-queue", action="store_true")
    ap.add_argument("--no-spill", action="store_true", help="in process: no store, held text stays in the state")
    ap.add_argument("--vllm", type=Path, help="vLLM 0.33 reference virtualenv: compare 1-token streams")
    ap.add_argument("--vllm-reps", type=int, default=3)
    ap.add_argument("--vllm-only", action="store_true", help="with --vllm: only that comparison")
    ap.add_argument("--prompt-tokens", type=int, default=0, help="with --vllm: the prompt's ids on every chunk")
    from family_cases import families

    ap.add_argument("--families", nargs="*", default=[], choices=families(),
                    help="also the parsed rows of these engine families (a test tokenizer each)")
    args = ap.parse_args()
    if args.vllm_only:
        print("\n".join(against_vllm(args.vllm, args.vllm_reps, args.prompt_tokens)))
        return
    with tempfile.TemporaryDirectory() as folder:
        rows = in_process(args.reps, args.families, Path(folder), not args.no_spill)
    print(f"{N_TOKENS}-token chat generation, in process, median of {args.reps} (per generation)\n")
    print("\n".join(rows))
    if args.vllm:
        print("\n".join(against_vllm(args.vllm, args.vllm_reps, args.prompt_tokens)))
    if not args.no_queue:
        print("\n".join(through_queue(args.queue_chunks)))


if __name__ == "__main__":
    main()
