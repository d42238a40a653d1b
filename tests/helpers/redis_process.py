"""A private `redis-server` on a free loopback port, for tests and benchmarks.

Never touches a shared server: its own port, its own temporary directory,
stopped (and its files removed) on exit.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import redis

T = TypeVar("T")


def ephemeral_ports() -> range:
    """The ports the kernel gives outgoing connections (and `bind(0)`)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    return range(low, high + 1)


def _listening_ports() -> range:
    """Where servers started by tests listen: below the ephemeral range. A
    port from `bind(0)` lies inside it, so any client socket (a Redis or HTTP
    connection of another process) could take it as its local port before the
    server binds it: a worker once died with "Address already in use" so."""
    top = min(ephemeral_ports().start, 65536)
    return range(10000, top) if top - 10000 >= 4096 else range(1024, top)


_pick = random.SystemRandom().choice


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """`n` distinct ports free now, below the ephemeral range. Each socket is
    held until all are chosen, so none is handed out twice."""
    sockets: list[socket.socket] = []
    choices = _listening_ports()
    try:
        while len(sockets) < n:
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", _pick(choices)))
            except OSError:  # in use (or TIME_WAIT): draw again
                s.close()
                continue
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class RedisProcess:
    """`with RedisProcess() as redis: redis.url` — started on enter, stopped on exit."""

    def __init__(self, port: int | None = None, appendonly: bool = False, extra: tuple[str, ...] = (),
                 env: dict[str, str] | None = None) -> None:
        """`env`: added to the server's environment (e.g. its allocator's MALLOC_CONF)."""
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            raise FileNotFoundError("redis-server is not installed (apt-get install redis-server)")
        self.port = port or free_port()
        self.appendonly = appendonly
        self.extra = extra
        self.env = env
        self.dir = Path(tempfile.mkdtemp(prefix="derender-redis-"))
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisProcess:
        args = [
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
            "--save", "", "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", "everysec", "--maxmemory-policy", "noeviction", *self.extra,
        ]
        env = None if self.env is None else {**os.environ, **self.env}
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith((b"+PONG", b"-NOAUTH")):  # up (with a password: up too)
                        return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server on port {self.port} did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> RedisProcess:
        # Already started (a helper that waits for it before handing it over):
        # a second start would leave the first server running unowned.
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_for(check: Callable[[], T], timeout: float = 30.0, what: str = "condition") -> T:
    """`check()`'s first truthy value, polling; a server that does not answer yet counts as false."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except (redis.RedisError, OSError):
            pass
        time.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}")
