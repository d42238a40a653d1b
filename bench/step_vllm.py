"""Engine steps through the queue beside vLLM 0.33's render server answering
the same chunks over HTTP, in one run.

    python bench/step_vllm.py --vllm VENV [--streams 64 256] [--seconds 5] [--connections 16]

VENV is the reference virtualenv of ../shared/vllm-peer/. N running chat
streams (bench/step.py's `Streams`: 1-token chunks, each with the state its
stream's previous chunk returned; `messages` added to `chat_request`,
which vLLM requires) are stepped as fast as answers come back, one engine:

* ours: one `step` job per engine step through Redis to one `derender
  worker` process (bench/step.py's path);
* vLLM: every chunk as its own `POST /v1/chat/completions/derender` to
  `vllm launch render` (one process, its own event loop), over
  `--connections` keep-alive connections; a step is done when all N
  answers are back.

Reports chunks/s, the serving side's CPU us per chunk (our worker tree plus
Redis; vLLM's server tree), the producer's, and the step's p50/p99 wall time
at saturation. Both sides' folded content is compared for one stream.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT)]
sys.path += [str(ROOT / "tests"), str(ROOT / "bench")]

from bodies import BodyMaker  # noqa: E402
from httpload import Connection  # noqa: E402
from measure import process_tree_cpu  # noqa: E402
from step import Streams, step_body, step_once  # noqa: E402

from derender_queue.core import ModelRegistry, read_models_config  # noqa: E402

PATH = "/v1/chat/completions/derender"
MESSAGES = [{"role": "user", "content": "Tell me a story."}]


def with_messages(streams: Streams) -> Streams:
    """vLLM's ChatCompletionRequest requires `messages`."""
    heads = []
    for head in streams.heads:
        fields = json.loads(head + b"}")
        fields["chat_request"]["messages"] = MESSAGES
        heads.append(json.dumps(fields).encode()[:-1])
    streams.heads = heads
    return streams


async def vllm_step(pool: list[Connection], streams: Streams) -> int:
    bodies = streams.bodies()
    answers: list[bytes] = [b""] * len(bodies)

    async def serve(conn: Connection, which: range) -> None:
        for i in which:
            status, answers[i] = await conn.request("POST", PATH, bodies[i])
            if status != 200:
                raise RuntimeError(f"vLLM answered {status}: {answers[i][:300]!r}")

    c = len(pool)
    await asyncio.gather(*(serve(conn, range(j, len(bodies), c)) for j, conn in enumerate(pool)))
    streams.take(answers)
    return len(answers)


async def saturate(step, streams: Streams, seconds: float, pids: list[int]) -> dict:
    await step(streams)  # warm-up: every stream has a state
    await step(streams)
    done, walls = 0, []
    cpu0 = time.process_time(), *(process_tree_cpu(p) for p in pids)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        t = time.perf_counter()
        done += await step(streams)
        walls.append((time.perf_counter() - t) * 1000)
    wall = time.perf_counter() - t0
    cpu1 = time.process_time(), *(process_tree_cpu(p) for p in pids)
    us = [(b - a) * 1e6 / done for a, b in zip(cpu0, cpu1, strict=True)]
    q = sorted(walls)
    return {"rate": done / wall, "producer_us": us[0], "server_us": sum(us[1:]), "steps": len(walls),
            "p50": statistics.median(q), "p99": q[min(int(len(q) * 0.99), len(q) - 1)]}


def start_vllm(venv: Path, port: int) -> tuple[subprocess.Popen, Path]:
    model = Path(tempfile.mkdtemp(prefix="vllm-model-"))
    subprocess.run([str(venv / "bin" / "python"), str(ROOT.parent / "shared" / "vllm-peer" / "make_model_dir.py"),
                    str(model)], check=True, capture_output=True)
    log = model / "server.log"
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "VLLM_LOGGING_LEVEL": "WARNING"}
    proc = subprocess.Popen(
        [str(venv / "bin" / "vllm"), "launch", "render", "--model", str(model), "--served-model-name",
         "deepseek-v4", "--host", "127.0.0.1", "--port", str(port)],
        env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
    return proc, log


async def wait_http(port: int, proc: subprocess.Popen, log: Path, timeout: float = 180) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            sys.exit(f"vLLM's render server exited:\n{log.read_text()[-3000:]}")
        try:
            conn = await Connection.open("127.0.0.1", port)
            status, _ = await conn.request("GET", "/health")
            await conn.close()
            if status == 200:
                return
        except OSError:
            pass
        await asyncio.sleep(0.5)
    sys.exit(f"vLLM's render server did not come up:\n{log.read_text()[-3000:]}")


async def run(args: argparse.Namespace, url: str, prefix: str, ours_pids: list[int], vllm_pid: int,
              port: int) -> list[str]:
    from derender_queue.wire.client import DerenderClient

    maker = BodyMaker(ModelRegistry(read_models_config(None), preload=False).get(None).vocab.tokenizer)
    rows = ["| streams | logprobs | path | chunks/s | serving CPU us/chunk | producer us/chunk | step p50 / p99 ms |",
            "|---|---|---|---|---|---|---|"]
    async with DerenderClient(url, key_prefix=prefix) as client:
        async with connections(port, 1) as pool:
            await check_same_text(client, pool[0], maker)
        for n in args.streams:
            for k in (0, 5):
                same = with_messages(Streams(maker, n, k, f"{n}-{k}"))  # the same chunks on both sides
                sat = await saturate(lambda s: step_once(client, s, False), copy.deepcopy(same), args.seconds,
                                     ours_pids)
                rows.append(row(n, k, "ours: step job", sat))
                # fresh connections: the server closes idle ones after 5 s
                async with connections(port, args.connections) as pool:
                    sat = await saturate(lambda s, p=pool: vllm_step(p, s), same, args.seconds, [vllm_pid])
                rows.append(row(n, k, "vLLM: HTTP per chunk", sat))
    return rows


def row(n: int, k: int, name: str, sat: dict) -> str:
    line = (f"| {n} | {'top-5' if k else 'none'} | {name} | {sat['rate']:,.0f} | {sat['server_us']:.1f} | "
            f"{sat['producer_us']:.1f} | {sat['p50']:.1f} / {sat['p99']:.1f} |")
    print(line, file=sys.stderr, flush=True)
    return line


@contextlib.asynccontextmanager
async def connections(port: int, n: int) -> AsyncIterator[list[Connection]]:
    pool = [await Connection.open("127.0.0.1", port) for _ in range(n)]
    try:
        yield pool
    finally:
        for conn in pool:
            await conn.close()


async def check_same_text(client, conn: Connection, maker: BodyMaker) -> None:
    """One top-5 stream's first 200 chunks fold to the same content on both sides."""
    texts = []
    same = with_messages(Streams(maker, 1, 5, "check"))
    for side in ("ours", "vllm"):
        streams = copy.deepcopy(same)
        text = []
        for _ in range(200):
            bodies = streams.bodies()
            if side == "ours":
                body = step_body(bodies)
                result = await client.wait(await client.submit("step", body, "deepseek-v4"))
                answer = json.loads(result.body)["results"][0]
                raw = json.dumps(answer, separators=(",", ":")).encode()
            else:
                _, raw = await conn.request("POST", PATH, bodies[0])
                answer = json.loads(raw)
            streams.take([raw])
            text.append(answer["chunk"]["choices"][0]["delta"].get("content") or "")
        texts.append("".join(text))
    if texts[0] != texts[1]:
        sys.exit(f"the two sides' content differs:\nours {texts[0][:200]!r}\nvLLM {texts[1][:200]!r}")


def main() -> None:
    from tests.helpers.redis_process import RedisProcess, free_port
    from tests.helpers.stack import Stack

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vllm", type=Path, required=True, help="vLLM 0.33 reference virtualenv")
    ap.add_argument("--streams", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--connections", type=int, default=16)
    args = ap.parse_args()
    port = free_port()
    proc, log = start_vllm(args.vllm, port)
    try:
        asyncio.run(wait_http(port, proc, log))
        with RedisProcess() as redis:
            stack = Stack(redis.url, "benchstepv", workers=1).start()
            try:
                pids = [stack.worker_procs[0].pid, redis.proc.pid]
                rows = asyncio.run(run(args, redis.url, "benchstepv", pids, proc.pid, port))
            finally:
                stack.close()
    finally:
        proc.terminate()
        proc.wait(30)
    print(f"1-token chunks of N running chat streams, one engine stepping as fast as answers return, "
          f"{args.seconds:g} s per row; vLLM over {args.connections} keep-alive connections\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
