"""Real processes for integration tests: `derender worker` / `derender api` /
`derender run` started as the console script would be, on loopback."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from email.message import Message

from tests.helpers.redis_process import free_port


def cli(*args: str, env: dict[str, str], log_path: str | None = None) -> subprocess.Popen:
    # The child holds its own copy of the log's descriptor; ours is closed once it has started.
    with open(log_path, "wb") if log_path else contextlib.nullcontext(subprocess.DEVNULL) as out:
        return subprocess.Popen(
            [sys.executable, "-m", "derender.cli", *args], env={**os.environ, **env},
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def get_json(url: str, timeout: float = 5) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def post(url: str, body: bytes, headers: dict[str, str] | None = None,
         timeout: float = 30) -> tuple[int, bytes, Message]:
    req = urllib.request.Request(url, data=body, headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers


def wait_until(check, timeout: float = 30, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except (OSError, http.client.HTTPException, ValueError):
            pass
        time.sleep(interval)
    raise TimeoutError(f"timed out waiting for {what}")


def metric(url: str, name: str, **labels: str) -> float:
    """Sum of one Prometheus series (all samples matching the labels)."""
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


@dataclass
class Stack:
    """An API and N workers against one Redis under one key prefix."""

    redis_url: str
    prefix: str
    workers: int = 1
    extra_env: dict[str, str] = field(default_factory=dict)
    api_port: int = field(default_factory=free_port)
    metrics_ports: list[int] = field(default_factory=list)
    procs: list[subprocess.Popen] = field(default_factory=list)
    worker_procs: list[subprocess.Popen] = field(default_factory=list)
    log_dir: str | None = None
    """When set, each process logs (JSON, debug level) to a file there."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def env(self, **more: str) -> dict[str, str]:
        logging = {"DERENDER_LOG_LEVEL": "debug"} if self.log_dir else {}
        return {"DERENDER_REDIS_URL": self.redis_url, "DERENDER_KEY_PREFIX": self.prefix,
                "DERENDER_PORT": str(self.api_port), "DERENDER_HEARTBEAT_S": "0.5", **logging,
                **self.extra_env, **more}

    def executions(self) -> dict[str, int]:
        """Jobs executed, counted from every worker's own log lines."""
        import collections
        import glob

        counts: collections.Counter = collections.Counter()
        for path in glob.glob(f"{self.log_dir}/worker-*.log"):
            with open(path, encoding="utf-8", errors="replace") as lines:
                for line in lines:
                    if '"job finished"' in line:
                        counts[json.loads(line)["job_id"]] += 1
        return dict(counts)

    def _log(self, name: str) -> str | None:
        return f"{self.log_dir}/{name}-{len(self.procs)}.log" if self.log_dir else None

    def start_worker(self, **env: str) -> subprocess.Popen:
        port = free_port()
        self.metrics_ports.append(port)
        proc = cli("worker", env=self.env(DERENDER_METRICS_PORT=str(port), **env), log_path=self._log("worker"))
        self.worker_procs.append(proc)
        self.procs.append(proc)
        return proc

    def start_api(self) -> subprocess.Popen:
        proc = cli("api", env=self.env(), log_path=self._log("api"))
        self.procs.append(proc)
        return proc

    def start(self) -> Stack:
        self.start_api()
        for _ in range(self.workers):
            self.start_worker()
        self.wait_ready(self.workers)
        return self

    def wait_ready(self, workers: int, timeout: float = 60) -> None:
        def ready():
            status, body = get_json(self.url + "/ready")
            return status == 200 and body["workers"] >= workers
        wait_until(ready, timeout, what=f"{workers} live workers")

    def worker_metric(self, name: str, **labels: str) -> float:
        return sum(metric(f"http://127.0.0.1:{p}/metrics", name, **labels) for p in self.metrics_ports)

    def close(self) -> None:
        for proc in self.procs:
            stop(proc)
