"""No process outlives the test that started it (tests/conftest.py's autouse
fixture uses this).

A process is the test session's if it descends from the pytest process or if
it carries the session's mark in its environment: every process a test starts
inherits the mark, so a worker's child orphaned by a SIGKILL (re-parented to
init) still counts. Processes of other sessions on the machine carry another
mark and are never touched. Only pids that appeared during the test are
looked at, so the check costs a directory listing per test when nothing
was started.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from pathlib import Path

from tests.helpers.procs import alive, stat

MARK_VARIABLE = "DERENDER_TEST_SESSION"
SETTLE_S = 15.0
"""How long a test's processes may take to exit after it ends (a stopped
worker drains, its children see their sockets close)."""


def _pids() -> set[int]:
    return {int(entry) for entry in os.listdir("/proc") if entry.isdigit()}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


class ProcessWatch:
    """The session's processes, and which of them each test left behind."""

    def __init__(self) -> None:
        self.mark = os.environ.setdefault(MARK_VARIABLE, secrets.token_hex(8))
        self._me = os.getpid()

    def snapshot(self) -> set[int]:
        """Every pid now (cheap): what a test may leave behind is among the others."""
        return _pids()

    def _ours(self, pid: int) -> bool:
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            environ = b""
        if f"{MARK_VARIABLE}={self.mark}".encode() in environ.split(b"\0"):
            return True
        for _ in range(64):  # or a descendant of pytest
            info = stat(pid)
            if info is None or info[1] <= 1:
                return False
            if info[1] == self._me:
                return True
            pid = info[1]
        return False

    def running_since(self, before: set[int]) -> set[int]:
        return {pid for pid in _pids() - before if pid != self._me and alive(pid) and self._ours(pid)}

    def left_behind(self, before: set[int]) -> dict[int, str]:
        """Processes started since `before` that are still running once they
        had SETTLE_S to exit; they are killed, so one leak fails one test."""
        deadline = time.monotonic() + SETTLE_S
        while (new := self.running_since(before)) and time.monotonic() < deadline:
            time.sleep(0.05)
        leftover = {pid: _cmdline(pid) for pid in new}
        for pid in leftover:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        return leftover
