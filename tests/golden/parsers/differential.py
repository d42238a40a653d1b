"""Differential run of a family against vLLM 0.34 with a fresh seed.

    .venv/bin/python tests/golden/parsers/differential.py --family qwen3 --seed 7 -n 300 --vllm /work/peer/v034

Records vLLM's answers in a subprocess of its virtualenv (``vllm_family.py``,
to a temp file unless ``--keep FILE``), then compares ours
(``ours_family.py``) and prints the differences and vLLM's own
stream-vs-non-streaming classes.  Exit status 1 when ours differ.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import ours_family  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("-n", type=int, default=300)
    ap.add_argument("--vllm", type=Path, default=Path("/work/peer/v034"), help="vLLM 0.34 virtualenv")
    ap.add_argument("--keep", type=Path, help="keep the recording here")
    ap.add_argument("--show", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp) / "cases.jsonl.gz"
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "VLLM_TARGET_DEVICE": "cpu"}
        subprocess.run([str(args.vllm / "bin" / "python"), str(HERE / "vllm_family.py"), "--family", args.family,
                        "--seed", str(args.seed), "-n", str(args.n), "--out", str(out)], check=True, env=env)
        meta, cases = ours_family.load(out)
        ders = ours_family.derenderers(meta["family"], meta["pairs"], Path(tmp) / "tokenizer")
        bad = ours_family.report(meta, cases, ders, args.show)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
