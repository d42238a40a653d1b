"""The leftover-process check (tests/helpers/leaks.py) finds what a test leaves running,
orphans included, and kills it."""

from __future__ import annotations

import subprocess

from tests.helpers import leaks
from tests.helpers.leaks import ProcessWatch
from tests.helpers.procs import alive
from tests.helpers.stack import wait_until


def test_a_child_and_an_orphan_left_running_are_found_and_killed(monkeypatch):
    monkeypatch.setattr(leaks, "SETTLE_S", 0.5)
    watch = ProcessWatch()
    before = watch.snapshot()
    child = subprocess.Popen(["sleep", "60"])
    # The shell exits at once: its `sleep` is re-parented (no longer our
    # descendant) and found by the session's mark in its environment.
    shell = "sleep 61 >/dev/null 2>&1 & echo $!"
    out = subprocess.run(["sh", "-c", shell], capture_output=True, text=True, check=True)
    orphan = int(out.stdout)
    left = watch.left_behind(before)
    child.wait()
    assert set(left) == {child.pid, orphan}, left
    assert "sleep 61" in left[orphan]
    wait_until(lambda: not alive(orphan), 10, what="the orphan killed")


def test_processes_that_exit_in_time_are_not_reported():
    watch = ProcessWatch()
    before = watch.snapshot()
    subprocess.run(["true"], check=True)
    assert watch.left_behind(before) == {}
