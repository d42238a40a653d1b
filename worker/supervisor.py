"""`derender worker --processes N`: N worker processes on one host.

One Python process keeps about one core busy (the GIL); N processes use N.
Each child is a plain `derender worker` with this process's settings (flags
included, passed as `DERENDER_*` variables) and its own metrics port
(`DERENDER_METRICS_PORT` + i). The parent forwards SIGTERM/SIGINT (each
child drains), restarts a child that dies unexpectedly, and exits 0 once all
children have stopped; if it is killed outright, the children get SIGTERM.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import subprocess
import sys
import time

from derender_queue.settings import Settings, child_environment
from worker.zygote import die_with_parent

log = logging.getLogger("derender.worker")
RESTART_DELAY_S = 1.0


def spawn_worker(settings: Settings, **update: object) -> subprocess.Popen[bytes]:
    """A plain `derender worker` child with `settings` (flags included, as
    `DERENDER_*` variables) and `update`; it gets SIGTERM if this process dies."""
    env = child_environment(settings.model_copy(update={"processes": 1, **update}), os.environ)
    # No thread has started here, so preexec_fn is safe: a parent killed
    # outright still has its children drain and exit.
    return subprocess.Popen([sys.executable, "-m", "derender.cli", "worker"], env=env,
                            preexec_fn=functools.partial(die_with_parent, os.getpid(), signal.SIGTERM))


def _spawn(index: int, settings: Settings) -> subprocess.Popen[bytes]:
    return spawn_worker(settings, metrics_port=settings.metrics_port + index if settings.metrics_port else 0)


def supervise(settings: Settings) -> int:
    children = {i: _spawn(i, settings) for i in range(settings.processes)}
    stopping = False

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("supervising %d worker processes: %s", len(children), [c.pid for c in children.values()])
    while True:
        for i, child in list(children.items()):
            code = child.poll()
            if code is None or stopping:
                continue
            log.error("worker process %d exited with %s; restarting", child.pid, code)
            time.sleep(RESTART_DELAY_S)
            children[i] = _spawn(i, settings)
        if stopping and all(c.poll() is not None for c in children.values()):
            codes = [c.returncode for c in children.values()]
            return 0 if all(code == 0 for code in codes) else 1
        time.sleep(0.2)
