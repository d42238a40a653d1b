"""A port another process holds is one line naming the setting to change,
said before the slow start-up (issue 32, item 2): a second `derender worker`
on a host once died with a 27-line traceback after loading its model, and
`derender run` printed "serving on ..." and then exited 3."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from derender_queue.ports import bind_error
from tests.helpers.redis_process import free_port
from worker.http import serve_metrics_and_health
from worker.liveness import Liveness


@contextlib.contextmanager
def held(port: int, host: str = "127.0.0.1") -> Iterator[None]:
    """Another process's server on `port` (a listening socket of this one)."""
    with socket.socket() as s:
        s.bind((host, port))
        s.listen()
        yield


def derender(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    # A Redis nobody listens on: a command that got past the port check would
    # wait for it (a worker for minutes), so the timeout says the check came first.
    base = {**os.environ, "DERENDER_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    return subprocess.run([sys.executable, "-m", "derender.cli", *args], env={**base, **env},
                          capture_output=True, text=True, timeout=60)


def assert_one_line(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert done.stdout == "", done.stdout  # no "serving on ..." banner
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    assert "in use" in lines[0] and all(word in lines[0] for word in words), lines[0]


@pytest.mark.slow  # starts derender processes
def test_a_second_worker_says_which_metrics_port_is_taken_before_loading_its_model():
    port = free_port()
    with held(port, "0.0.0.0"):
        done = derender("worker", DERENDER_METRICS_PORT=str(port))
    assert_one_line(done, f":{port}", "DERENDER_METRICS_PORT", "--metrics-port")


@pytest.mark.slow
def test_worker_processes_check_every_metrics_port_they_count_up_to():
    first = free_port()
    with held(first + 1):
        done = derender("worker", "--processes", "2", "--metrics-port", str(first))
    assert_one_line(done, f":{first + 1}", "--metrics-port")


@pytest.mark.slow
@pytest.mark.parametrize("command", ["api", "run"])
def test_api_and_run_say_the_http_port_is_taken_before_serving(command):
    port = free_port()
    with held(port):
        done = derender(command, "--port", str(port), DERENDER_METRICS_PORT="0")
    assert_one_line(done, f"127.0.0.1:{port}", "--port", "DERENDER_PORT")


@pytest.mark.slow
def test_run_checks_its_worker_childs_metrics_port_too():
    port = free_port()
    with held(port):
        done = derender("run", "--port", str(free_port()), DERENDER_METRICS_PORT=str(port))
    assert_one_line(done, f":{port}", "DERENDER_METRICS_PORT")


def test_a_port_taken_after_the_check_is_the_same_one_line():
    port = free_port()
    with held(port), pytest.raises(SystemExit) as exit_:
        serve_metrics_and_health(port, Liveness())
    message = str(exit_.value.code)
    assert f":{port} is in use" in message and "DERENDER_METRICS_PORT" in message and "\n" not in message


def test_bind_error_tells_a_free_port_from_a_taken_one():
    port = free_port()
    assert bind_error("127.0.0.1", port) is None
    with held(port):
        error = bind_error("127.0.0.1", port)
    assert error is not None and "in use" in error.strerror
