"""A worker stops saying "alive" when its job loop is dead or stuck (issue 12,
item 1): `/health` answers 503 with the reason and the heartbeat is
withdrawn, so the API stops listing it and a liveness probe restarts it."""

from __future__ import annotations

import asyncio
import json

import fakeredis
import pytest

from derender_queue.settings import Settings
from derender_queue.wire.keys import Keys
from worker import lane_server
from worker.http import health_app
from worker.liveness import Liveness
from worker.main import serve
from worker.queue_worker import DerenderWorker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_liveness_counts_idle_waits_and_flags_stalls_and_ended_loops():
    clock = Clock()
    live = Liveness(stall_s=10, clock=clock)
    live.progress("m", quiet_s=0.5)
    clock.now += 10.4  # blocked in its 0.5 s wait, plus less than the stall allowance
    live.loop_ticked()
    assert live.ok()
    clock.now += 0.2
    assert live.problems() == ["job loop m stuck 10s past its longest wait"]
    live.waiting_for_jobs("m")  # a running job holds every slot: no deadline
    clock.now += 1000
    live.loop_ticked()
    assert live.ok()
    live.ended("m", "RuntimeError('boom')")
    assert live.problems() == ["job loop m ended: RuntimeError('boom')"]


def test_waiting_on_a_redis_that_does_not_answer_is_not_stuck():
    clock = Clock()
    live = Liveness(stall_s=10, clock=clock)
    live.progress("m", quiet_s=0.5)
    for _ in range(10):  # a stall: the probe keeps failing
        clock.now += 5
        live.loop_ticked()
        live.redis_failed()
        assert live.ok()
    clock.now += 9.9  # Redis answers again: the loop has stall_s to show progress
    live.loop_ticked()
    assert live.ok()
    clock.now += 0.2
    assert live.problems() == ["job loop m stuck 10s past its longest wait"]


def test_liveness_flags_a_stalled_event_loop():
    clock = Clock()
    live = Liveness(stall_s=10, clock=clock)
    clock.now += 10
    assert live.problems() == ["event loop stalled 10s"]


def test_health_answers_503_with_the_reasons():
    live = Liveness()
    app = health_app(lambda environ, start: [b"metrics"], live)
    statuses: list[str] = []

    def get(path: str) -> tuple[str, bytes]:
        body = b"".join(app({"PATH_INFO": path}, lambda status, headers: statuses.append(status)))
        return statuses[-1] if statuses else "", body

    status, body = get("/health")
    assert status == "200 OK" and json.loads(body) == {"status": "ok"}
    live.ended("deepseek-v4", "boom")
    status, body = get("/health")
    assert status.startswith("503") and json.loads(body)["problems"] == ["job loop deepseek-v4 ended: boom"]
    assert app({"PATH_INFO": "/metrics"}, lambda *_: None) == [b"metrics"]


def _settings(prefix: str) -> Settings:
    return Settings(key_prefix=prefix, metrics_port=0, poll_delay_s=0.05, heartbeat_s=0.1)


def _heartbeats(server: fakeredis.FakeServer, prefix: str) -> int:
    return int(fakeredis.FakeRedis(server=server).zcard(Keys(prefix).workers))


async def _until(check, timeout: float = 20.0) -> None:
    async def poll() -> None:
        while not check():
            await asyncio.sleep(0.02)

    await asyncio.wait_for(poll(), timeout)


async def test_a_dead_job_loop_withdraws_the_heartbeat_and_stops_the_worker(registry, prefix, monkeypatch):
    """Before: the loop task died silently; serve() waited for a signal for
    ever and the heartbeat kept saying the worker was alive."""
    server = fakeredis.FakeServer()
    started = asyncio.Event()

    async def dies(self: DerenderWorker) -> None:
        started.set()
        await _until(lambda: _heartbeats(server, prefix) == 1)
        raise RuntimeError("job loop bug")

    monkeypatch.setattr(DerenderWorker, "main", dies)
    liveness = Liveness()
    healthy = await asyncio.wait_for(
        serve(_settings(prefix), registry, fakeredis.FakeAsyncRedis(server=server), liveness=liveness), 30)
    assert started.is_set() and healthy is False
    assert liveness.problems() == ["job loop deepseek-v4 ended: RuntimeError('job loop bug')"]
    assert _heartbeats(server, prefix) == 0


async def test_a_stuck_job_loop_fails_health_and_withdraws_the_heartbeat(registry, prefix, monkeypatch):
    server = fakeredis.FakeServer()
    stuck = asyncio.Event()

    async def hangs(*args: object) -> bytes | None:
        stuck.set()
        await asyncio.Event().wait()  # e.g. a Redis call that never answers
        return None

    monkeypatch.setattr(lane_server, "claim", hangs)
    liveness, stop = Liveness(stall_s=0.5), asyncio.Event()
    worker = asyncio.create_task(serve(_settings(prefix), registry, fakeredis.FakeAsyncRedis(server=server),
                                       stop=stop, liveness=liveness))
    try:
        await _until(stuck.is_set)
        await _until(lambda: not liveness.ok())
        assert f"job loop {prefix}:{{s0}}:lane:deepseek-v4 (v2 lane) stuck" in " ".join(liveness.problems())
        await _until(lambda: _heartbeats(server, prefix) == 0)
    finally:
        stop.set()
        assert await asyncio.wait_for(worker, 30) is True


@pytest.mark.parametrize("failure", [RuntimeError("bug"), ValueError("another bug")])
async def test_the_job_loop_survives_an_unexpected_error(registry, prefix, monkeypatch, failure):
    """Any exception in the loop is logged and counted; the loop goes on."""
    server = fakeredis.FakeServer()
    calls = 0
    real = lane_server.LaneServer._claim_one

    async def fails_twice(self: lane_server.LaneServer, *args: object) -> None:
        nonlocal calls
        calls += 1
        if calls <= 2:
            raise failure
        await real(self, *args)

    monkeypatch.setattr(lane_server.LaneServer, "_claim_one", fails_twice)
    liveness, stop = Liveness(), asyncio.Event()
    worker = asyncio.create_task(serve(_settings(prefix), registry, fakeredis.FakeAsyncRedis(server=server),
                                       stop=stop, liveness=liveness))
    try:
        await _until(lambda: calls >= 4)
        assert liveness.ok() and not worker.done()
    finally:
        stop.set()
        assert await asyncio.wait_for(worker, 30) is True


def test_a_stalled_redis_is_an_outage_not_a_stuck_worker(prefix):
    """Redis stopped (SIGSTOP) for longer than the stall allowance: the
    worker's Redis probe fails (worker.main.REDIS_PROBE_TIMEOUT_S), so the job
    loop's wait is accounted for and /health stays 200 (no liveness probe
    restarts the fleet for Redis's fault); jobs are served once it is back.
    Before the probe, /health said "stuck" after ~10 s."""
    import signal
    import time

    from tests.helpers.redis_process import RedisProcess
    from tests.helpers.stack import Stack, get_json, post, wait_until
    from worker.liveness import STALL_S

    server = RedisProcess().start()
    s = Stack(server.url, prefix, workers=1).start()
    try:
        health = f"http://127.0.0.1:{s.metrics_ports[0]}/health"
        assert get_json(health)[0] == 200
        server.proc.send_signal(signal.SIGSTOP)
        statuses, until = [], time.monotonic() + STALL_S + 6
        try:
            while time.monotonic() < until:  # sampled over the whole stall, past the allowance
                statuses.append(get_json(health, timeout=5))
                time.sleep(0.25)
        finally:
            server.proc.send_signal(signal.SIGCONT)
        assert [st for st, _ in statuses if st != 200] == [], [b for st, b in statuses if st != 200][:1]
        body = b'{"generate_response": {"request_id": "back", "choices": [{"index": 0, "token_ids": [1], ' \
               b'"finish_reason": "stop"}]}}'
        wait_until(lambda: post(s.url + "/v1/chat/completions/derender", body, timeout=10)[0] == 200, 30,
                   what="serving again")
    finally:
        s.close()
        server.close()
