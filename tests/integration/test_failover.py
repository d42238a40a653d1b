"""bench/failover.py at CI size: 1,000 jobs through the API on
`redis+sentinel://` with DERENDER_MIN_REPLICAS=1 while the sentinels fail the
master over (SENTINEL FAILOVER), then the new master is SIGKILLed."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")
def test_failover_loses_no_acknowledged_job_and_answers_within_10s(tmp_path):
    from failover import run_failover

    out = run_failover(1000, clients=32, min_replicas=1, log_dir=str(tmp_path))
    print(out.report())
    assert out.sent == 1000 and out.acknowledged == 1000
    assert out.lost == 0, out.lost_ids
    assert out.different_results == 0 and out.mismatched == 0
    assert out.completed == 1000 and not out.errors, out.errors
    assert out.restarted == [], "an API or worker process exited"
    assert [f.name for f in out.faults] == ["SENTINEL FAILOVER", "SIGKILL of the master"]
    for fault in out.faults:
        recovery = out.recovery_s(fault)
        assert recovery is not None and recovery <= 10, f"{fault.name}: {recovery}"
