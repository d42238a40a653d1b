"""What DERENDER_LOG_JOBS costs a worker: one "job finished" JSON log line.

    python bench/log_cost.py [--lines 20000] [--reps 7]

The worker's own logger and formatter (derender_queue.logs), writing to a file
as a container's stderr would, against the default (successful jobs log at
DEBUG, so the call stops at `isEnabledFor`). Prints the median per line, wall
and CPU, over the repetitions.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from derender_queue.logs import JsonFormatter

FIELDS = {"job_id": "Qm9vN2xq1c5r3Xw0hZk9aA", "request_id": "req-0123456789", "status": 200,
          "endpoint": "chat", "model": "deepseek-v4", "ms": 3}


def per_line_us(log: logging.Logger, lines: int, log_jobs: bool) -> tuple[float, float]:
    ok_level = logging.INFO if log_jobs else logging.DEBUG
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(lines):
        if log.isEnabledFor(ok_level):  # as worker/jobs.py does
            log.log(ok_level, "job finished", extra=FIELDS)
    return ((time.perf_counter() - wall) / lines * 1e6, (time.process_time() - cpu) / lines * 1e6)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".log") as sink:
        handler = logging.StreamHandler(sink)
        handler.setFormatter(JsonFormatter())
        log = logging.getLogger("derender.worker")
        log.handlers[:] = [handler]
        log.propagate = False
        log.setLevel(logging.INFO)
        print(f"{args.lines} 'job finished' lines per repetition, {args.reps} repetitions; median per job (µs)")
        print("\n| DERENDER_LOG_JOBS | wall µs | CPU µs |\n|---|---|---|")
        for log_jobs in (False, True):
            runs = [per_line_us(log, args.lines, log_jobs) for _ in range(args.reps)]
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            print(f"| {'on' if log_jobs else 'off (default)'} | {wall:.2f} | {cpu:.2f} |")


if __name__ == "__main__":
    main()
