"""Derender core speed: request bytes -> response bytes, ours beside vLLM 0.33's.

    python bench/core.py [--reps 7] [--sizes 500,1000,2000,4000] [--vllm VENV]

For each size (completion tokens) and logprobs setting (none, top-5, top-20)
and both endpoints, it times the in-process derender on fresh bodies (a new
token slice and new candidates every call) and reports median wall and CPU
milliseconds. With `--vllm VENV` (the reference virtualenv built by
../shared/vllm-peer/make_venv.sh) the same bodies go through vLLM's own
derender in a subprocess of this run, after ours, and the ratio is printed.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Look in bench/ last: bench/queue.py must not shadow the stdlib `queue`.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.append(str(Path(__file__).resolve().parent))

from bodies import BodyMaker  # noqa: E402

from derender_queue.core import Derenderer, ModelConfig, ModelRegistry, read_models_config  # noqa: E402

LLAMA = Path(__file__).resolve().parent.parent / "tests" / "golden" / "llama"

TOPK = (0, 5, 20)


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def llama_derenderer(folder: Path) -> Derenderer:
    """The Llama-style fixture family (Metaspace, byte fallback; tests/golden/llama)."""
    (folder / "tokenizer.json").write_bytes(gzip.decompress((LLAMA / "tokenizer.json.gz").read_bytes()))
    shutil.copy(LLAMA / "tokenizer_config.json", folder)
    return Derenderer(ModelRegistry((ModelConfig(name="llama-fixture", tokenizer=str(folder)),)))


def time_ours(derenderer: Derenderer, endpoint: str, bodies: list[bytes]) -> tuple[float, float]:
    derenderer.derender(endpoint, bodies[0])  # warm-up
    walls, cpus = [], []
    for body in bodies[1:]:
        gc.collect()
        w, c = time.perf_counter(), time.process_time()
        derenderer.derender(endpoint, body)
        walls.append((time.perf_counter() - w) * 1000)
        cpus.append((time.process_time() - c) * 1000)
    return statistics.median(walls), statistics.median(cpus)


def time_vllm(venv: Path, cases: dict[str, tuple[str, list[bytes]]]) -> dict[str, tuple[float, float]]:
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for case, (endpoint, bodies) in cases.items():
            for body in bodies:
                f.write(json.dumps({"case": case, "endpoint": endpoint, "body": body.decode()}) + "\n")
    script = Path(__file__).with_name("vllm_side.py")
    proc = subprocess.run([str(venv / "bin" / "python"), str(script), f.name],
                          capture_output=True, text=True, check=False)
    os.unlink(f.name)
    if proc.returncode != 0:
        sys.exit(f"vLLM side failed:\n{proc.stderr[-3000:]}")
    out = {}
    for line in proc.stdout.splitlines():
        row = json.loads(line)
        out[row["case"]] = (statistics.median(row["wall_ms"]), statistics.median(row["cpu_ms"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="500,1000,2000,4000")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--vllm", type=Path, help="vLLM 0.33 reference virtualenv")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    before = rss_mb()
    t0 = time.perf_counter()
    registry = ModelRegistry(read_models_config(None))
    load_s = time.perf_counter() - t0
    derenderer = Derenderer(registry)
    maker = BodyMaker(registry.get(None).vocab.tokenizer)
    print(f"model load with tables: {load_s:.2f} s; RSS {before:.0f} MB before, {rss_mb():.0f} MB after load")

    cases: dict[str, tuple[str, list[bytes]]] = {}
    for endpoint in ("chat", "completion"):
        for n in sizes:
            for k in TOPK:
                make = maker.chat if endpoint == "chat" else maker.completion
                cases[f"{endpoint} {n} top-{k}"] = (endpoint, [make(n, k) for _ in range(args.reps + 1)])
    ours = {case: time_ours(derenderer, ep, bodies) for case, (ep, bodies) in cases.items()}
    # The second tokenizer family: ours only (the vLLM side loads DeepSeek).
    with tempfile.TemporaryDirectory() as folder:
        llama = llama_derenderer(Path(folder))
        lmaker = BodyMaker(llama.registry.get(None).vocab.tokenizer, model="llama-fixture")
        llama_cases: dict[str, tuple[str, list[bytes]]] = {}
        for endpoint in ("chat", "completion"):
            for n in sizes:
                for k in TOPK:
                    make = lmaker.chat if endpoint == "chat" else lmaker.completion
                    llama_cases[f"llama {endpoint} {n} top-{k}"] = (endpoint,
                                                                     [make(n, k) for _ in range(args.reps + 1)])
        ours |= {case: time_ours(llama, ep, bodies) for case, (ep, bodies) in llama_cases.items()}
    print(f"RSS after all cases: {rss_mb():.0f} MB")
    theirs = time_vllm(args.vllm, cases) if args.vllm else {}
    cases |= llama_cases

    print(f"\nmedian of {args.reps} calls, ms (wall / CPU), bytes in -> bytes out")
    header = "| case | body MB | ours wall | ours CPU |" + (" vLLM wall | vLLM CPU | speed-up |" if theirs else "")
    print(header)
    print("|" + "|".join("---" for _ in range(header.count("|") - 1)) + "|")
    for case, (wall, cpu) in ours.items():
        size = len(cases[case][1][1]) / 2**20
        row = f"| {case} | {size:.2f} | {wall:.2f} | {cpu:.2f} |"
        if case in theirs:
            vw, vc = theirs[case]
            row += f" {vw:.1f} | {vc:.1f} | {vw / wall:.0f}x |"
        print(row)


if __name__ == "__main__":
    main()
