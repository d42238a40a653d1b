"""A Sentinel-managed Redis on loopback for tests: a master, replicas and
sentinels, each a private `redis-server` on a free port, all stopped (and
their files removed) on exit.

    with SentinelGroup(replicas=1) as group:
        group.url                  # redis+sentinel://127.0.0.1:P1,.../derender/0
        group.failover()           # SENTINEL FAILOVER; group.master_port() follows

Sentinel's internal timers are shortened for tests unless `fast_timers=False`
(`SENTINEL DEBUG`: INFO every second instead of every 10 s, hello messages
every 0.5 s instead of 2 s), so a master demoted by `SENTINEL FAILOVER` is made
a replica ~2 s after the switch rather than ~10 s; down-after and the failover
timeout are constructor arguments.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import redis

from tests.helpers.redis_process import RedisProcess, free_port, wait_for

SERVICE = "derender"


def role(port: int) -> list:
    with redis.Redis(port=port, socket_timeout=1, socket_connect_timeout=1) as r:
        reply = r.execute_command("ROLE")
    return [x.decode() if isinstance(x, bytes) else x for x in reply]


class SentinelGroup:
    def __init__(self, replicas: int = 1, sentinels: int = 3, down_after_ms: int = 1000,
                 failover_timeout_ms: int = 3000, service: str = SERVICE, fast_timers: bool = True) -> None:
        self.service = service
        self.fast_timers = fast_timers
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.nodes: dict[int, RedisProcess] = {}
        first = free_port()
        self.initial = [first] + [free_port() for _ in range(replicas)]
        self.sentinel_ports = [free_port() for _ in range(sentinels)]
        self.sentinels: list[subprocess.Popen] = []
        self.dir = Path(tempfile.mkdtemp(prefix="derender-sentinel-"))

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{self.service}/0"

    # ---------------------------------------------------------------- start, stop

    def start(self) -> SentinelGroup:
        master, *replicas = self.initial
        self.start_node(master)
        for port in replicas:
            self.start_node(port, replica_of=master)
        wait_for(lambda: len(role(master)[2]) == len(replicas), 20, "replicas attached")
        for port in self.sentinel_ports:
            self._start_sentinel(port, master)
        wait_for(self._sentinels_agree, 30, "sentinels to see the master, replicas and each other")
        return self

    def start_node(self, port: int, replica_of: int | None = None) -> RedisProcess:
        # A demoted master has writes the new one lacks (sentinels' own hellos at least), so it
        # resyncs in full; without the default 5 s wait for more replicas to share the transfer.
        extra = ("--repl-diskless-sync-delay", "0")
        if replica_of:
            extra += ("--replicaof", "127.0.0.1", str(replica_of))
        node = RedisProcess(port=port, extra=extra)
        self.nodes[port] = node
        return node.start()

    def _start_sentinel(self, port: int, master: int) -> None:
        conf = self.dir / f"sentinel-{port}.conf"  # sentinels rewrite their config: a file of their own
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {self.dir}\nlogfile {self.dir}/sentinel-{port}.log\n"
            f"sentinel monitor {self.service} 127.0.0.1 {master} {len(self.sentinel_ports) // 2 + 1}\n"
            f"sentinel down-after-milliseconds {self.service} {self.down_after_ms}\n"
            f"sentinel failover-timeout {self.service} {self.failover_timeout_ms}\n"
            f"sentinel parallel-syncs {self.service} 1\n"
        )
        proc = subprocess.Popen([shutil.which("redis-server"), str(conf), "--sentinel"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.sentinels.append(proc)
        client = redis.Redis(port=port, socket_timeout=1)
        wait_for(lambda: client.ping(), 10, f"sentinel on {port}")
        if self.fast_timers:
            client.execute_command("SENTINEL", "DEBUG", "info-period", 1000, "publish-period", 500)
        client.close()

    def _sentinels_agree(self) -> bool:
        for port in self.sentinel_ports:
            with redis.Redis(port=port, socket_timeout=1) as s:
                state = s.sentinel_master(self.service)
            if state["num-other-sentinels"] != len(self.sentinel_ports) - 1:
                return False
            if state["num-slaves"] != len(self.nodes) - 1:
                return False
        return True

    def close(self) -> None:
        for proc in self.sentinels:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        for node in self.nodes.values():
            node.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> SentinelGroup:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- topology

    def master_port(self) -> int:
        """Where the sentinels say the master is."""
        for port in self.sentinel_ports:
            try:
                with redis.Redis(port=port, socket_timeout=1) as s:
                    return int(s.sentinel_get_master_addr_by_name(self.service)[1])
            except (redis.RedisError, OSError):
                continue
        raise RuntimeError("no sentinel answered")

    def failover(self) -> None:
        with redis.Redis(port=self.sentinel_ports[0], socket_timeout=5) as s:
            s.execute_command("SENTINEL", "FAILOVER", self.service)

    def kill(self, port: int) -> None:
        """SIGKILL a Redis node (no shutdown, no save)."""
        proc = self.nodes[port].proc
        assert proc is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def healed(self, master: int) -> bool:
        """`master` is the master, every other live node replicates it with its
        link up, and every sentinel agrees."""
        live = [p for p, n in self.nodes.items() if n.proc and n.proc.poll() is None]
        if role(master)[0] != "master":
            return False
        for port in live:
            if port != master:
                r = role(port)
                if r[0] != "slave" or r[2] != master or r[3] != "connected":
                    return False
        for port in self.sentinel_ports:
            with redis.Redis(port=port, socket_timeout=1) as s:
                state = s.sentinel_master(self.service)
                if state["port"] != master or state["num-slaves"] < len(live) - 1:
                    return False
                replicas = s.sentinel_slaves(self.service)
            # What a sentinel needs to fail over to a replica: it is up and, by its last INFO, linked.
            good = [r for r in replicas if r["port"] in live and not r["is_sdown"] and not r["is_disconnected"]
                    and r.get("master-link-status") == "ok" and r.get("master-port") == master]
            if len(good) != len(live) - 1:
                return False
        return True
