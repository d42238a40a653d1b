"""A local Redis Cluster on loopback for tests and benchmarks: masters with a
replica each, every node a private `redis-server` (tests/helpers/redis_process.py) on a
free port, all stopped (and their files removed) on exit.

    with LocalCluster(masters=3, replicas=1) as cluster:
        cluster.url                           # redis+cluster://127.0.0.1:P1,...
        cluster.owner(slot)                   # port of the master serving a slot
        new = cluster.kill_master(port)       # SIGKILL; returns the promoted replica's port
        cluster.restart(port)                 # the killed node rejoins (as a replica)
        cluster.migrate(range(0, 100), src, dst)   # SETSLOT IMPORTING/MIGRATING + MIGRATE + NODE

`node_timeout_ms` is `cluster-node-timeout`: how long a master may not answer
before the others mark it failed and its replica takes over (Redis's default
is 15 s; 1 s here so a failover takes ~2-3 s).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from typing import Any

import redis
from redis.crc import key_slot

from tests.helpers.redis_process import RedisProcess, free_port, free_ports, wait_for

HOST = "127.0.0.1"


def slot(key: str) -> int:
    return int(key_slot(key.encode()))


async def until(check: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    """`wait_for` for async tests: polls without blocking the event loop; `check` may be async."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return value
        except (redis.RedisError, OSError):
            pass
        await asyncio.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}")


class LocalCluster:
    def __init__(self, masters: int = 3, replicas: int = 1, node_timeout_ms: int = 1000,
                 password: str | None = None, extra: tuple[str, ...] = ()) -> None:
        if shutil.which("redis-cli") is None:
            raise FileNotFoundError("redis-cli is not installed (apt-get install redis-tools)")
        self.masters_wanted = masters
        self.replicas_wanted = replicas
        self.node_timeout_ms = node_timeout_ms
        self.password = password
        self.extra = extra
        self.nodes: dict[int, RedisProcess] = {}
        self.bus_ports: dict[int, int] = {}
        self.paused: set[int] = set()

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis+cluster://{auth}" + ",".join(f"{HOST}:{p}" for p in self.live_ports())

    def client(self, port: int, **options: Any) -> redis.Redis:
        """A plain (non-cluster) client of one node, for administration."""
        return redis.Redis(HOST, port, password=self.password, socket_timeout=5, socket_connect_timeout=2,
                           decode_responses=True, **options)

    def info(self, port: int) -> dict[str, str]:
        """CLUSTER INFO of one node."""
        with self.client(port) as r:
            info = r.execute_command("CLUSTER INFO")  # redis-py parses it
        return {str(k): str(v) for k, v in info.items()}

    def commandstats(self, port: int) -> dict[str, int]:
        """Calls per command on one node since its last CONFIG RESETSTAT (commands run by scripts count)."""
        with self.client(port) as r:
            stats = r.info("commandstats")
        return {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()}

    def reset_stats(self) -> None:
        for port in self.live_ports():
            with self.client(port) as r:
                r.config_resetstat()

    # ---------------------------------------------------------------- start, stop

    def start(self) -> LocalCluster:
        nodes = self.masters_wanted * (1 + self.replicas_wanted)
        chosen = free_ports(2 * nodes)  # distinct: a node's port and its bus port
        ports = []
        for port, bus in zip(chosen[:nodes], chosen[nodes:], strict=True):
            ports.append(self._start_node_anew(port, bus))
        create = ["redis-cli", "--cluster", "create", *(f"{HOST}:{p}" for p in ports),
                  "--cluster-replicas", str(self.replicas_wanted), "--cluster-yes"]
        env = {**os.environ, "REDISCLI_AUTH": self.password} if self.password else None
        out = subprocess.run(create, capture_output=True, text=True, timeout=60, env=env)
        if out.returncode != 0 or "[OK] All 16384 slots covered" not in out.stdout:
            raise RuntimeError(f"redis-cli --cluster create failed:\n{out.stdout}\n{out.stderr}")
        self.wait_healthy()
        return self

    def _start_node_anew(self, port: int, bus: int, tries: int = 3) -> int:
        """Start a node on `port` (bus port `bus`); if it cannot (another
        process took a port between its choice and the bind), on new ports.
        The port it serves on."""
        for attempt in range(tries):
            self.bus_ports[port] = bus
            try:
                self._start_node(port)
                return port
            except RuntimeError:
                self.nodes.pop(port).close()
                self.bus_ports.pop(port)
                if attempt == tries - 1:
                    raise
                port, bus = free_ports(2)
        raise AssertionError("unreachable")

    def _start_node(self, port: int) -> RedisProcess:
        # The bus port is a free port of its own: Redis's default, port + 10000, may be taken or past 65535.
        extra = ("--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf",
                 "--cluster-port", str(self.bus_ports.setdefault(port, free_port())),
                 "--cluster-node-timeout", str(self.node_timeout_ms),
                 # A killed master's replica promotes itself however stale its data (tests kill
                 # masters on purpose), and replicas stay with their master.
                 "--cluster-replica-validity-factor", "0", "--cluster-allow-replica-migration", "no",
                 "--repl-diskless-sync-delay", "0", "--logfile", "redis.log", *self.extra)
        if self.password:
            extra += ("--requirepass", self.password, "--masterauth", self.password)
        process = RedisProcess(port=port, extra=extra)
        self.nodes[port] = process
        return process.start()

    def close(self) -> None:
        for port in list(self.paused):
            self.resume(port)  # a stopped process ignores SIGTERM until continued
        for process in self.nodes.values():
            process.close()

    def __enter__(self) -> LocalCluster:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- topology

    def live_ports(self) -> list[int]:
        """Nodes running (and not paused)."""
        return [p for p, n in self.nodes.items() if n.proc is not None and n.proc.poll() is None
                and p not in self.paused]

    def node_id(self, port: int) -> str:
        with self.client(port) as r:
            return str(r.execute_command("CLUSTER MYID"))

    def tag_on(self, port: int, avoid: Iterable[int] = (), start: int = 0) -> str:
        """A hash tag ("t<n>") whose slot the master on `port` serves, not one of the `avoid` slots."""
        owners, avoid = self.slot_owners(), set(avoid)
        return next(t for n in itertools.count(start) if owners[slot(t := f"t{n}")] == port and slot(t) not in avoid)

    def blocked_clients(self, port: int, command: str) -> list[dict[str, Any]]:
        """Clients of a node blocked in `command` now (CLIENT LIST)."""
        with self.client(port) as r:
            return [c for c in r.client_list() if c["cmd"] == command and "b" in c["flags"]]

    def slot_owners(self, port: int | None = None) -> dict[int, int]:
        """slot -> master port, as one live node sees it."""
        with self.client(port or self.live_ports()[0]) as r:
            ranges = r.execute_command("CLUSTER SLOTS")
        return {slot: int(master[1]) for start, end, master, *_ in ranges for slot in range(start, end + 1)}

    def owner(self, slot: int) -> int:
        return self.slot_owners()[slot]

    def masters(self) -> list[int]:
        """Ports of the masters serving slots, in slot order."""
        return list(dict.fromkeys(self.slot_owners().values()))

    def role(self, port: int) -> list[Any]:
        with self.client(port) as r:
            return list(r.execute_command("ROLE"))

    def replicas_of(self, master: int) -> list[int]:
        """Replicas connected to a master now."""
        return [int(replica[1]) for replica in self.role(master)[2]]

    def replicated(self, master: int, timeout: float = 10.0) -> None:
        """Wait until every replica has acknowledged all the master wrote so far
        (replication is asynchronous: a master killed sooner takes its last writes along)."""
        offset = int(self.role(master)[1])

        def caught_up() -> bool:
            replicas = self.role(master)[2]
            return bool(replicas) and all(int(r[2]) >= offset for r in replicas)

        wait_for(caught_up, timeout, f"the replicas of {master} to acknowledge offset {offset}")

    def healthy(self) -> bool:
        """Every live node says the cluster is ok, knows every live node, and
        agrees on who serves every slot; every replica's link is up."""
        live = self.live_ports()
        views = []
        for port in live:
            info = self.info(port)
            if info.get("cluster_state") != "ok" or info.get("cluster_slots_ok") != "16384":
                return False
            views.append(self.slot_owners(port))
            role = self.role(port)
            if role[0] == "slave" and role[3] != "connected":
                return False
        if not all(view == views[0] for view in views) or len(set(views[0].values())) != self.masters_wanted:
            return False
        return all(self._replication_view(port) == self._replication() for port in live)

    def _replication(self) -> dict[str, str]:
        """replica id -> master id, as the replication links are (ROLE)."""
        return {self.node_id(r): self.node_id(m) for m in self.masters() for r in self.replicas_of(m)}

    def _replication_view(self, port: int) -> dict[str, str]:
        """replica id -> master id, as one node's cluster view has it: a master
        ignores a manual failover request from a replica it does not know as its own."""
        with self.client(port) as r:
            everyone = r.execute_command("CLUSTER NODES")
        live = {f"{HOST}:{p}" for p in self.live_ports()}
        nodes = {address: n for address, n in everyone.items() if address.split("@")[0] in live}
        if len(nodes) != len(live) or any(flag in n["flags"] for n in nodes.values()
                                          for flag in ("fail", "handshake", "noaddr")):
            return {}
        return {n["node_id"]: n["master_id"] for n in nodes.values() if "slave" in n["flags"] and n["connected"]}

    def wait_healthy(self, timeout: float = 30.0) -> None:
        wait_for(self.healthy, timeout, "the cluster to be ok on every node")

    # ---------------------------------------------------------------- faults

    def pause(self, port: int) -> None:
        """SIGSTOP a node: it holds its connections and answers nothing (a hung host)."""
        self.paused.add(port)
        os.kill(self.nodes[port].proc.pid, signal.SIGSTOP)  # type: ignore[union-attr]

    def resume(self, port: int) -> None:
        os.kill(self.nodes[port].proc.pid, signal.SIGCONT)  # type: ignore[union-attr]
        self.paused.discard(port)

    def kill(self, port: int) -> None:
        """SIGKILL a node (no shutdown, no save)."""
        proc = self.nodes[port].proc
        assert proc is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def kill_master(self, port: int, timeout: float = 30.0) -> int:
        """SIGKILL a master; once its replica is promoted and every live node
        agrees, the new master's port."""
        replicas = self.replicas_of(port)
        slots = [s for s, owner in self.slot_owners().items() if owner == port]
        self.kill(port)
        new = wait_for(lambda: next((r for r in replicas if self.owner(slots[0]) == r), None),
                       timeout, f"a replica of {port} to be promoted")
        wait_for(lambda: self._agree_without(port), timeout, "every live node to see the promotion")
        return new

    def _agree_without(self, dead: int) -> bool:
        live = self.live_ports()
        views = [self.slot_owners(p) for p in live]
        return all(v == views[0] for v in views) and dead not in views[0].values() and all(
            self.info(p).get("cluster_state") == "ok" for p in live)

    def restart(self, port: int) -> None:
        """Start a stopped node again with its own nodes.conf (a killed master rejoins as a replica)."""
        self.nodes[port].start()
        self.wait_healthy()
        wait_for(lambda: any(port in self.replicas_of(m) for m in self.masters()), 30, f"{port} to replicate")
        # Listed is not yet synced: until its full sync is done and acknowledged, a WAIT
        # (DERENDER_MIN_REPLICAS) on its master times out (test_cluster_queue's killed-master test did).
        self.replicated(next(m for m in self.masters() if port in self.replicas_of(m)), timeout=30)

    def failover(self, replica: int) -> None:
        """CLUSTER FAILOVER on a replica: a coordinated switch, no write lost."""
        with self.client(replica) as r:
            r.execute_command("CLUSTER FAILOVER")
        try:
            wait_for(lambda: self.role(replica)[0] == "master", 30, f"{replica} to be master")
        except TimeoutError as exc:
            master = next((p for p in self.masters() if replica in self.replicas_of(p)), None)
            raise TimeoutError(f"{exc}; its log ends:\n{self.log(replica)}\nits master's ({master}):\n"
                               f"{self.log(master) if master else ''}") from None
        self.wait_healthy()

    def log(self, port: int, lines: int = 40) -> str:
        """The end of a node's log file (in its directory)."""
        path = self.nodes[port].dir / "redis.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    # ---------------------------------------------------------------- slot migration

    def begin_migration(self, slots: Iterable[int], source: int, target: int) -> None:
        """Mark slots IMPORTING on the target and MIGRATING on the source: the
        source still serves keys it has and answers ASK for the others."""
        source_id, target_id = self.node_id(source), self.node_id(target)
        with self.client(source) as src, self.client(target) as dst:
            for slot in slots:
                dst.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source_id)
                src.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target_id)

    def move_keys(self, slots: Iterable[int], source: int, target: int, batch: int = 100) -> int:
        """MIGRATE every key of the slots from source to target; how many moved."""
        moved = 0
        with self.client(source) as src:
            for slot in slots:
                while keys := src.execute_command("CLUSTER GETKEYSINSLOT", slot, batch):
                    auth = ("AUTH", self.password) if self.password else ()
                    src.execute_command("MIGRATE", HOST, target, "", 0, 5000, *auth, "KEYS", *keys)
                    moved += len(keys)
        return moved

    def end_migration(self, slots: Iterable[int], target: int) -> None:
        """Assign the slots to the target, telling the target first (it bumps
        its epoch), then every other master, as `redis-cli --cluster reshard` does."""
        target_id = self.node_id(target)
        ordered = [target] + [m for m in self.masters() if m != target]
        slots = list(slots)
        for port in ordered:
            with self.client(port) as r:
                for slot in slots:
                    r.execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)
        wait_for(lambda: all(self.slot_owners(p).get(slots[0]) == target for p in self.live_ports()),
                 30, "every node to see the migration")

    def migrate(self, slots: Iterable[int], source: int, target: int) -> int:
        """Move slots (with their keys) from one master to another; keys moved."""
        slots = list(slots)
        self.begin_migration(slots, source, target)
        moved = self.move_keys(slots, source, target)
        self.end_migration(slots, target)
        return moved
