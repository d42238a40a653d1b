"""What a large value costs passed to a Lua script, against a plain SET.

    python bench/script_args.py [--reps 11]

On a private redis-server, per size (2 and 6 MiB), the median of `--reps`:
the v2 `finish` script with the result as its argument (what a large result
cost before `finish_large`), a pipeline of SET to the job's out key plus the
`finish_large` script that renames it (what it costs now), and a plain SET.
Wall time through redis-py on uvloop, one client, nothing else running.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT)]
sys.path += [str(ROOT / "tests")]

import redis.asyncio as aredis  # noqa: E402
import uvloop  # noqa: E402

from derender_queue.wire.lanes import FINISH, FINISH_LARGE  # noqa: E402
from tests.helpers.redis_process import RedisProcess  # noqa: E402


async def measure(url: str, reps: int) -> None:
    r = aredis.Redis.from_url(url)
    finish, large = await r.script_load(FINISH), await r.script_load(FINISH_LARGE)
    print("| value | finish with the value as argument | SET out + finish_large | plain SET |")
    print("|---|---|---|---|")
    for mib in (2, 6):
        value = b"x" * (mib * 2**20)
        times: dict[str, list[float]] = {"arg": [], "rename": [], "set": []}
        for _ in range(reps):
            await r.rpush("active", "v")
            await r.set("job", "P")
            t = time.perf_counter()
            await r.evalsha(finish, 2, "active", "job", value, 60_000, "", "0", "id")
            times["arg"].append(time.perf_counter() - t)
            await r.rpush("active", "v")
            await r.set("job", "P")
            t = time.perf_counter()
            async with r.pipeline(transaction=False) as pipe:
                pipe.set("out", value, px=60_000)
                pipe.evalsha(large, 3, "active", "job", "out", "", "id")
                await pipe.execute()
            times["rename"].append(time.perf_counter() - t)
            t = time.perf_counter()
            await r.set("plain", value)
            times["set"].append(time.perf_counter() - t)
        ms = {k: statistics.median(v) * 1000 for k, v in times.items()}
        print(f"| {mib} MiB | {ms['arg']:.2f} ms | {ms['rename']:.2f} ms | {ms['set']:.2f} ms |")
    await r.aclose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=11)
    args = ap.parse_args()
    with RedisProcess() as server:
        uvloop.run(measure(server.url, args.reps))


if __name__ == "__main__":
    main()
