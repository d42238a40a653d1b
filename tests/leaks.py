"""No process outlives the test that started it (tests/conftest.py's autouse
fixture uses this).

A process is the test session's if it descends from the pytest process or if
it carries the session's mark in its environment: every process a test starts
inherits the mark, so a worker's child orphaned by a SIGKILL (re-parented to
init) still counts. Processes of other sessions on the machine carry another
mark and are never touched.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from pathlib import Path

from procs import alive

MARK_VARIABLE = "DERENDER_TEST_SESSION"
SETTLE_S = 15.0
"""How long a test's processes may take to exit after it ends (a stopped
worker drains, its children see their pipes close)."""

Identity = tuple[int, int]
"""(pid, start time in clock ticks): a pid reused by a new process is another process."""


def _identity(pid: int) -> Identity | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None  # exited; only its exit status is left for its parent
    return pid, int(fields[19])


def _parent(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(raw[raw.rindex(")") + 2 :].split()[1])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


class ProcessWatch:
    """The session's processes, and which of them each test left behind."""

    def __init__(self) -> None:
        self.mark = os.environ.setdefault(MARK_VARIABLE, secrets.token_hex(8))
        self._marked: dict[Identity, bool] = {}  # a process's environment never changes: read it once

    def _carries_mark(self, identity: Identity) -> bool:
        if identity not in self._marked:
            try:
                environ = Path(f"/proc/{identity[0]}/environ").read_bytes()
            except OSError:
                environ = b""
            self._marked[identity] = f"{MARK_VARIABLE}={self.mark}".encode() in environ.split(b"\0")
        return self._marked[identity]

    def snapshot(self) -> set[Identity]:
        me = os.getpid()
        found: set[Identity] = set()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            identity = _identity(int(entry))
            if identity is not None and (self._carries_mark(identity) or self._descends_from_me(identity[0], me)):
                found.add(identity)
        return found

    @staticmethod
    def _descends_from_me(pid: int, me: int) -> bool:
        for _ in range(64):
            parent = _parent(pid)
            if parent is None or parent <= 1:
                return False
            if parent == me:
                return True
            pid = parent
        return False

    def left_behind(self, before: set[Identity]) -> dict[int, str]:
        """Processes started since `before` that are still running once they
        had SETTLE_S to exit; they are killed, so one leak fails one test."""
        deadline = time.monotonic() + SETTLE_S
        while (new := self.snapshot() - before) and time.monotonic() < deadline:
            time.sleep(0.05)
        leftover = {pid: _cmdline(pid) for pid, _ in new}
        for pid in leftover:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        return leftover
