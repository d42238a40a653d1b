"""A Redis that does not answer (issue 32, item 3): `derender run` says so in
one line instead of serving; `derender api` waits for it, naming it in
`/ready` (never its password), and every loop that waits for it backs off
instead of retrying at a fixed pace (the API's result subscription once
logged "resubscribing" every 200 ms)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from derender_queue.wire.pacing import Backoff
from derender_queue.wire.redis_url import redacted, redis_address
from tests.helpers.redis_process import RedisProcess, free_port
from tests.helpers.stack import cli, get_json, stop, wait_until

RETRIES = 5
"""Retry lines to wait for: their gaps must grow (0.2 s, doubling, at most 2 s)."""


def _lines(path: Path, wanted: Callable[[dict], bool]) -> list[dict]:
    out = []
    for raw in path.read_text(errors="replace").splitlines():
        if raw.startswith("{"):
            entry = json.loads(raw)
            if wanted(entry):
                out.append(entry)
    return out


def _gaps(entries: list[dict]) -> list[float]:
    times = [datetime.strptime(e["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp() for e in entries]
    return [round(b - a, 3) for a, b in itertools.pairwise(times)]


def _assert_backs_off(log: Path, wanted: Callable[[dict], bool], what: str) -> None:
    entries = wait_until(lambda: (found := _lines(log, wanted))[RETRIES - 1:] and found, 60,
                         what=f"{RETRIES} {what} lines")
    gaps = _gaps(entries[:RETRIES])
    # Doubling from the first wait: the fourth gap is about 8 times the first (jitter aside).
    assert gaps[-1] >= 3 * gaps[0] and gaps[-1] >= 1.0, f"{what}: retry gaps {gaps} s do not back off"


@pytest.mark.slow  # starts derender processes
def test_derender_run_says_in_one_line_that_its_redis_does_not_answer():
    port = free_port()
    done = subprocess.run([sys.executable, "-m", "derender.cli", "run", "--port", str(free_port())],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "DERENDER_REDIS_URL": f"redis://:s3cret@127.0.0.1:{port}/0"})
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stdout == "", done.stdout  # no "serving on ..." banner
    line, *rest = done.stderr.strip().splitlines()
    assert not rest and f"Redis at 127.0.0.1:{port} does not answer" in line and "DERENDER_REDIS_URL" in line, line
    assert "s3cret" not in done.stderr


@pytest.mark.slow
def test_the_api_names_an_unreachable_redis_in_ready_and_backs_off_resubscribing(tmp_path):
    port, api_port = free_port(), free_port()
    log = tmp_path / "api.log"
    proc = cli("api", env={"DERENDER_REDIS_URL": f"redis://:s3cret@127.0.0.1:{port}/0",
                           "DERENDER_PORT": str(api_port)}, log_path=str(log))
    try:
        status, body = wait_until(lambda: get_json(f"http://127.0.0.1:{api_port}/ready"), 60, what="the API")
        assert status == 503 and body["redis"].startswith(f"unreachable: 127.0.0.1:{port} ("), body
        assert "s3cret" not in json.dumps(body)
        _assert_backs_off(log, lambda e: e["msg"].startswith("result subscription lost"), "resubscribe")
        assert "s3cret" not in log.read_text()
    finally:
        assert stop(proc, signal.SIGINT) == 0


@pytest.mark.slow
def test_a_workers_claim_loops_back_off_while_redis_is_down(tmp_path, prefix):
    log = tmp_path / "worker.log"
    with RedisProcess() as redis:
        # A worker whose last heartbeat is older than CLAIM_BEATS beats stops claiming (issue 31,
        # item 2), and so stops retrying its lanes: a 10 s heartbeat keeps it claiming for 20 s
        # after Redis goes, time for RETRIES backed-off retries (about 7 s of waits).
        proc = cli("worker", env={"DERENDER_REDIS_URL": redis.url, "DERENDER_KEY_PREFIX": prefix,
                                  "DERENDER_METRICS_PORT": "0", "DERENDER_HEARTBEAT_S": "10"},
                   log_path=str(log))
        try:
            wait_until(lambda: _lines(log, lambda e: e["msg"].startswith("worker ")
                                      and " serving " in e["msg"]), 90, what="the worker serving")
            redis.stop()
            _assert_backs_off(log, lambda e: "(v2 lane) unavailable" in e["msg"] and ":lane:" in e["msg"],
                              "light lane retry")
        finally:
            assert stop(proc) == 0


def test_backoff_doubles_up_to_its_cap_and_starts_again_after_a_success():
    backoff = Backoff(0.2, cap_s=2.0)
    waits = [backoff.next_s() for _ in range(7)]
    for wait, expected in zip(waits, [0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 2.0], strict=True):
        assert expected * 0.9 <= wait <= expected * 1.1, waits
    backoff.reset()
    assert backoff.next_s() <= 0.22


@pytest.mark.parametrize(("url", "address"), [
    ("redis://:pw@cache.internal:6380/2", "cache.internal:6380"),
    ("redis://127.0.0.1", "127.0.0.1:6379"),
    ("unix:///run/redis.sock?db=1", "/run/redis.sock"),
    ("redis+sentinel://u:pw@s1:26379,s2:26380/main/0", "master 'main' via sentinels s1:26379,s2:26380"),
    ("rediss+cluster://u:pw@n1:7000,n2", "cluster nodes n1:7000,n2:6379"),
])
def test_an_address_never_holds_credentials(url, address):
    assert redis_address(url) == address


def test_redacted_masks_user_info_and_password_parameters():
    assert redacted("redis+sentinel://u:pw@h:1/m?sentinel_password=x&socket_timeout=2") == \
        "redis+sentinel://***@h:1/m?sentinel_password=***&socket_timeout=2"
    assert redacted("redis://h:1/0") == "redis://h:1/0"

