"""docker-compose.yml's `sentinel` profile, checked without Docker: its shape,
deploy/sentinel.env, and its redis, replica and sentinel commands run here as
local processes (host names mapped to loopback ports) with an api and a
worker on the profile's redis+sentinel:// URL, through a failover and a
replica that restarts while the sentinels still name it the master."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import urllib.parse
from pathlib import Path

import pytest
import redis
import yaml

from derender_queue.wire.redis_url import parse_sentinel_url
from tests.deploy.test_deploy import CHAT, CHAT_PATH, COMPOSE, ROOT, _interpolate, seconds, service_env
from tests.helpers.redis_process import free_port
from tests.helpers.sentinel_process import role, wait_for
from tests.helpers.stack import Stack, post, stop, wait_until

SENTINEL_ENV = ROOT / "deploy" / "sentinel.env"
PROFILE = {"redis-replica", "sentinel-1", "sentinel-2", "sentinel-3"}


def env_file() -> dict[str, str]:
    lines = [line for line in SENTINEL_ENV.read_text().splitlines() if line.strip() and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def sentinel_compose() -> dict:
    """docker-compose.yml as `docker compose --env-file deploy/sentinel.env` sees it."""
    return _interpolate(yaml.safe_load(COMPOSE.read_text()), env_file())


def test_sentinel_profile_shape():
    compose = sentinel_compose()
    services = compose["services"]
    assert "name" not in yaml.safe_load(COMPOSE.read_text()), "docker-compose 1.29 (Debian) refuses a top-level name"
    assert {name for name, spec in services.items() if spec.get("profiles") == ["sentinel"]} == PROFILE
    assert env_file()["COMPOSE_PROFILES"] == "sentinel"
    # The api and the workers find the master through the three sentinels, by the name they monitor.
    env = service_env(compose, "api")
    assert env == service_env(compose, "worker")
    url = parse_sentinel_url(env["DERENDER_REDIS_URL"])
    sentinels = sorted(n for n in services if n.startswith("sentinel-"))
    assert sorted(url.sentinels) == [(name, 26379) for name in sentinels]
    for name in sentinels:
        spec = services[name]
        sentinel_env = service_env(compose, name)
        assert sentinel_env["SENTINEL_NAME"] == name and sentinel_env["MASTER_NAME"] == url.service
        assert sentinel_env["MASTER_HOST"] == "redis" and int(sentinel_env["QUORUM"]) == len(sentinels) // 2 + 1
        assert 1000 <= int(sentinel_env["DOWN_AFTER_MS"]) < 30000, "docs/sentinel.md recommends a few seconds"
        assert spec["healthcheck"]["test"] == ["CMD", "redis-cli", "-p", "26379", "ping"]
    # Acknowledged means replicated, and a restarted master holds what it acknowledged.
    assert int(env["DERENDER_MIN_REPLICAS"]) == 1
    flags = services["redis"]["command"]
    assert flags[flags.index("--appendfsync") + 1] == "always"
    assert service_env(compose, "redis-replica")["APPENDFSYNC"] == "always"
    for name in PROFILE:
        mounts = {v.split(":")[1]: v.split(":")[0] for v in services[name]["volumes"]}
        script = services[name]["command"][-1]
        assert (ROOT / mounts[str(Path(script).parent)] / Path(script).name).exists(), script
    # Without the profile, nothing changes: one Redis, the plain URL, no replicas awaited.
    plain = _interpolate(yaml.safe_load(COMPOSE.read_text()), {})
    assert service_env(plain, "api")["DERENDER_REDIS_URL"] == "redis://redis:6379/0"
    assert service_env(plain, "api")["DERENDER_MIN_REPLICAS"] == "0"
    assert seconds(services["redis-replica"]["stop_grace_period"]) >= 10


def test_compose_v1_parses_the_file():
    """Debian's docker-compose 1.29 (when installed) accepts the file, with and without the profile."""
    v1 = shutil.which("docker-compose")
    if v1 is None:
        pytest.skip("docker-compose (v1) is not installed")
    for extra in ([], ["--env-file", str(SENTINEL_ENV), "--profile", "sentinel"]):
        done = subprocess.run([v1, "-f", str(COMPOSE), *extra, "config", "-q"], capture_output=True, text=True,
                              cwd=ROOT, timeout=60)
        assert done.returncode == 0, done.stderr


class ProfileHere:
    """The profile's redis, redis-replica and sentinels as local processes."""

    def __init__(self, workdir: Path) -> None:
        self.compose = sentinel_compose()
        self.workdir = workdir
        self.ports = {name: free_port() for name in ("redis", "redis-replica")}
        self.ports.update({name: free_port() for name in ("sentinel-1", "sentinel-2", "sentinel-3")})
        self.procs: dict[str, subprocess.Popen] = {}

    def here(self, host: str, port: int) -> str:
        return f"127.0.0.1:{self.ports.get(host, port)}"

    def start(self, name: str, down_after_ms: int | None = None) -> None:
        spec = self.compose["services"][name]
        env = {**os.environ, **service_env(self.compose, name), "BIND": "127.0.0.1"}
        data = self.workdir / name
        data.mkdir(exist_ok=True)
        if name == "redis":
            args = list(spec["command"])
            args[args.index("--dir") + 1] = str(data)
            args[args.index("--replica-announce-ip") + 1] = "127.0.0.1"
            argv = [shutil.which("redis-server"), *args[1:], "--port", str(self.ports["redis"]), "--bind", "127.0.0.1"]
        else:
            argv = ["sh", str(ROOT / "deploy" / "redis" / Path(spec["command"][-1]).name)]
            env.update(MASTER_HOST="127.0.0.1", MASTER_PORT=str(self.ports["redis"]))
        if name == "redis-replica":
            env.update(NODE_NAME="127.0.0.1", PORT=str(self.ports[name]), DIR=str(data),
                       SENTINELS=" ".join(f"127.0.0.1:{self.ports[s]}" for s in ("sentinel-1", "sentinel-2",
                                                                                  "sentinel-3")))
        if name.startswith("sentinel-"):
            env.update(SENTINEL_NAME="127.0.0.1", SENTINEL_PORT=str(self.ports[name]), CONFIG=str(data / "s.conf"))
            if down_after_ms:
                env["DOWN_AFTER_MS"] = str(down_after_ms)
        with open(self.workdir / f"{name}.log", "ab") as log:
            self.procs[name] = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                start_new_session=True)

    def url(self) -> str:
        """deploy/sentinel.env's DERENDER_REDIS_URL with the sentinels' names mapped here."""
        parts = urllib.parse.urlsplit(service_env(self.compose, "api")["DERENDER_REDIS_URL"])
        hosts = ",".join(self.here(*h) for h in parse_sentinel_url(parts.geturl()).sentinels)
        return parts._replace(netloc=hosts).geturl()

    def master(self) -> int:
        with redis.Redis(port=self.ports["sentinel-1"], socket_timeout=1) as s:
            return int(s.sentinel_get_master_addr_by_name("derender")[1])

    def close(self) -> None:
        for proc in self.procs.values():
            stop(proc, timeout=10)


@pytest.mark.skipif(shutil.which("redis-server") is None or shutil.which("redis-cli") is None,
                    reason="redis-server/redis-cli not installed")
def test_sentinel_profile_runs_here_through_a_failover_and_a_replica_restart(tmp_path, prefix):
    here = ProfileHere(tmp_path)
    stack = None
    try:
        here.start("redis")
        wait_for(lambda: role(here.ports["redis"])[0] == "master", 20, "redis up")
        here.start("redis-replica")  # no sentinel yet: a replica of `redis`
        wait_for(lambda: role(here.ports["redis-replica"])[3] == "connected", 20, "replica in sync")
        for name in ("sentinel-1", "sentinel-2", "sentinel-3"):
            here.start(name, down_after_ms=1000)  # the compose value (5000) only makes the test slower

        def agreed() -> bool:
            with redis.Redis(port=here.ports["sentinel-3"], socket_timeout=1) as s:
                state = s.sentinel_master("derender")
            return state["num-slaves"] == 1 and state["num-other-sentinels"] == 2

        wait_for(agreed, 30, "sentinels to see the replica and each other")
        env = service_env(here.compose, "api")
        stack = Stack(here.url(), prefix, workers=1,
                      extra_env={"DERENDER_MIN_REPLICAS": env["DERENDER_MIN_REPLICAS"]}).start()
        assert post(stack.url + CHAT_PATH, json.dumps(CHAT).encode())[0] == 200

        # A failover: the api and the worker follow, the old master rejoins as a replica.
        with redis.Redis(port=here.ports["sentinel-1"]) as s:
            s.execute_command("SENTINEL", "FAILOVER", "derender")
        wait_for(lambda: here.master() == here.ports["redis-replica"], 30, "the replica promoted")
        wait_until(lambda: post(stack.url + CHAT_PATH, json.dumps(CHAT).encode())[0] == 200, 60, 0.5,
                   "served again after the failover")

        # The promoted replica crashes and is restarted at once, before the sentinels notice:
        # its script waits for them to promote `redis`, then replicates it.
        replica = here.procs["redis-replica"]
        replica.send_signal(signal.SIGKILL)
        replica.wait()
        here.start("redis-replica")
        wait_for(lambda: here.master() == here.ports["redis"], 60, "`redis` promoted again")
        wait_for(lambda: role(here.ports["redis-replica"])[:3] == ["slave", "127.0.0.1", here.ports["redis"]], 60,
                 "the restarted node a replica of `redis`")
        assert "waiting for them to promote the other" in (tmp_path / "redis-replica.log").read_text()
        wait_until(lambda: post(stack.url + CHAT_PATH, json.dumps(CHAT).encode())[0] == 200, 60, 0.5,
                   "served again after the restart")
    finally:
        if stack:
            stack.close()
        here.close()


def test_k8s_redis_failover_matches_the_urls_it_documents():
    """deploy/k8s/optional/redis-failover.yaml (a CRD, so checked by hand): a master and
    a replica, three sentinels, and the URL its comments give parses to that operator's
    Service and master name."""
    from tests.deploy.test_deploy import K8S

    path = K8S / "optional" / "redis-failover.yaml"
    failover = yaml.safe_load(path.read_text())
    assert failover["apiVersion"] == "databases.spotahome.com/v1" and failover["kind"] == "RedisFailover"
    spec = failover["spec"]
    assert spec["sentinel"]["replicas"] == 3 and spec["redis"]["replicas"] >= 2
    assert "appendfsync always" in spec["redis"]["customConfig"]
    assert any(c.startswith("down-after-milliseconds ") for c in spec["sentinel"]["customConfig"])
    name, namespace = failover["metadata"]["name"], failover["metadata"]["namespace"]
    for doc in (path, K8S / "secret.yaml"):
        urls = [w.split("=", 1)[-1] for w in doc.read_text().split() if "redis+sentinel://" in w]
        url = parse_sentinel_url(urls[-1])
        assert url.sentinels == ((f"rfs-{name}.{namespace}.svc.cluster.local", 26379),) and url.service == "mymaster"
