"""The API's event loop (issue 15, tails): its lag is measured and exposed."""

from __future__ import annotations

import time

import fakeredis
from starlette.testclient import TestClient

from api.app import create_app
from api.server import state_factory
from derender_queue.settings import Settings

LAG = "derender_api_event_loop_lag_seconds"


def _buckets(text: str) -> dict[str, float]:
    return {line.split('le="', 1)[1].split('"', 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line.startswith(LAG + "_bucket{")}


def _app():
    return create_app(state_factory(Settings(), redis=fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())))


def test_event_loop_lag_is_exposed_and_observes_a_stall():
    with TestClient(_app()) as client:
        before = _buckets(client.get("/metrics").text)
        assert before, f"{LAG} is not on /metrics"
        # Hold the app's loop for 100 ms: the sampler's 10 ms sleep wakes at least 90 ms late.
        client.portal.call(time.sleep, 0.1)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            after = _buckets(client.get("/metrics").text)
            if after["+Inf"] - after["0.05"] > before["+Inf"] - before["0.05"]:
                break
            time.sleep(0.02)
        else:
            raise AssertionError(f"no lag over 50 ms observed: {before} -> {after}")
