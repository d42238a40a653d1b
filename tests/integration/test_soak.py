"""bench/soak.py at CI size: 1,000 mixed jobs through the API, 64 clients,
2 workers, one worker SIGKILLed and restarted, Redis restarted once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

pytestmark = pytest.mark.slow  # real processes (docs/development.md: test tiers)


def test_soak_loses_nothing_duplicates_nothing_mismatches_nothing(redis_server, tmp_path):
    from soak import run_soak

    out = run_soak(1000, clients=64, distinct=80, max_tokens=1000, log_dir=str(tmp_path))
    print(out.report())
    assert out.sent == 1000
    assert out.lost == 0 and out.duplicates == 0 and out.mismatched == 0
    assert not out.errors, out.errors
    assert out.completed + len(out.timed_out) == out.sent
    assert out.late_completed == len(out.timed_out)
