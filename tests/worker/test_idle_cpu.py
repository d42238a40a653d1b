"""An idle deployment costs next to no CPU (issue 32, item 1).

`derender run` on the embedded default once kept a core busy with no work
(fakeredis's BLMOVE answers at once where Redis blocks, so the claim loops
spun). Each test starts the real processes, waits until they serve, then
reads the CPU time the process tree itself used (utime + stime from /proc:
robust on a shared machine, unlike wall-clock timing) over a few idle
seconds, and fails above 5% of one core for the whole tree.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time

import pytest

from tests.helpers.procs import cpu_seconds, descendants
from tests.helpers.redis_process import free_port
from tests.helpers.stack import cli, get_json, stop, wait_until

LIMIT = 0.15
"""Of one core, for every process of the tree together. The same code idles at
2.0-3.0% of a core on a normal day of the 2-core development machine and at
4.5-8.0% on a slow one (2026-12-06, evening: the machine's speed drifts up to
3x between days); the idle loop this test was written against (issue 32)
burnt 37-97%. The limit sits between, so a spin fails on any day and a slow
day does not."""
WINDOW_S = 2.0
WINDOWS = 3
"""The quietest of these windows counts: a one-off start-up task (a lazy
import, a first recovery pass) is not an idle loop, which burns in all of them."""


def _label(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return str(pid)
    return f"{pid} {' '.join(a.decode(errors='replace') for a in args[1:4])}"


def idle_cpu(root: int) -> tuple[float, dict[str, float]]:
    """The tree's CPU use in its quietest window (share of one core), and each process's."""
    best: tuple[float, dict[str, float]] | None = None
    for _ in range(WINDOWS):
        pids = {root} | descendants(root)
        before = {pid: cpu_seconds(pid) for pid in pids}
        start = time.monotonic()
        time.sleep(WINDOW_S)  # the measurement itself: CPU used over this idle stretch
        elapsed = time.monotonic() - start
        shares = {}
        for pid, used in before.items():
            now = cpu_seconds(pid)
            if used is not None and now is not None:
                shares[_label(pid)] = (now - used) / elapsed
        total = sum(shares.values())
        if best is None or total < best[0]:
            best = (total, shares)
    assert best is not None
    return best


def assert_idle(proc: subprocess.Popen) -> None:
    total, shares = idle_cpu(proc.pid)
    report = ", ".join(f"{name}: {share:.1%}" for name, share in sorted(shares.items()))
    print(f"idle CPU {total:.1%} of a core ({report})")
    assert total <= LIMIT, f"idle CPU {total:.1%} of a core, over {LIMIT:.0%}: {report}"


def run_is_idle(redis_url: str, prefix: str = "derender") -> None:
    """`derender run` against `redis_url` ("": the embedded one) serves, then idles."""
    port = free_port()
    env = {"DERENDER_REDIS_URL": redis_url, "DERENDER_KEY_PREFIX": prefix, "DERENDER_PORT": str(port),
           "DERENDER_METRICS_PORT": str(free_port())}
    proc = cli("run", env=env)
    try:
        wait_until(lambda: _ready(f"http://127.0.0.1:{port}"), 90, what="the API and its worker")
        assert_idle(proc)
    finally:
        assert stop(proc, signal.SIGINT) == 0


def _ready(url: str) -> bool:
    status, body = get_json(url + "/ready")
    return status == 200 and body.get("workers", 0) >= 1


@pytest.mark.slow  # starts `derender run`
def test_derender_run_on_the_embedded_redis_is_idle():
    run_is_idle("")


def test_derender_run_on_a_real_redis_is_idle(redis_server, prefix):
    """The API, its worker child and the worker's heavy-job children."""
    run_is_idle(redis_server.url, prefix)


@pytest.mark.slow  # starts a Sentinel group and `derender run`
def test_derender_run_on_sentinel_is_idle(prefix):
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    from tests.helpers.sentinel_process import SentinelGroup

    with SentinelGroup(replicas=1) as group:
        run_is_idle(group.url, prefix)


def test_derender_run_on_a_cluster_is_idle(redis_cluster, prefix):
    """16 shards: a claim loop per shard and lane, each blocked on its own connection."""
    run_is_idle(redis_cluster.url, prefix)
