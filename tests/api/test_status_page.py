"""The status page (`GET /status`, `GET /status.json`): the rolling window and
the rendering in process, then a real stack with two workers under load,
looked at in headless Chromium."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import re
import threading
import urllib.error
import urllib.request

import msgspec
import pytest

from api.recent import MAX_ERRORS, MAX_MESSAGE, WINDOW_S, Recent
from api.status_data import Minute, QueueRow, Status, WorkerRow
from api.status_page import CSP, render_page
from derender_queue.wire.heartbeat import Heartbeat
from tests.helpers.redis_process import free_port
from tests.helpers.stack import Stack, post, wait_until
from tests.helpers.webdriver import Browser, chromium_binaries

CHAT = "/v1/chat/completions/derender"
TOKEN = "ops-0123456789abcdef"
AUTH = {"authorization": f"Bearer {TOKEN}"}


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


def test_window_counts_each_second_and_forgets_after_a_minute():
    clock = Clock()
    recent = Recent(clock)
    for ms in (1, 2, 3, 4, 100):
        recent.observe(ms / 1000, 200)
    recent.observe(0.005, 400)
    clock.t += 1
    seconds = recent.seconds()
    assert len(seconds) == WINDOW_S and seconds[-1].requests == 6 and seconds[-1].errors == 1
    assert 2.5 <= seconds[-1].p50_ms <= 4.5 and 85 <= seconds[-1].p99_ms <= 115  # buckets are 19% wide
    assert recent.minute()[0] == 6
    clock.t += WINDOW_S
    assert recent.minute() == (0, None, None) and not any(s.requests for s in recent.seconds())


def test_error_rings_are_bounded_per_client_and_keep_no_bodies():
    clock = Clock()
    recent = Recent(clock)
    for i in range(MAX_ERRORS + 5):
        clock.t += 1
        recent.error(400, "x" * 10_000, f"a{i}", "chat", "alice")
    clock.t += 1
    recent.error(503, "busy", "b0", "jobs_submit", "bob")
    mine = recent.errors("alice")
    assert len(mine) == MAX_ERRORS and mine[0].job_id == f"a{MAX_ERRORS + 4}" and mine[-1].job_id == "a5"
    assert all(len(e.message) == MAX_MESSAGE for e in mine)
    assert [e.job_id for e in recent.errors("bob")] == ["b0"] and recent.errors("carol") == []
    everyone = recent.errors()
    assert len(everyone) == MAX_ERRORS and everyone[0].client == "bob" and everyone[0].route == "jobs_submit"


def test_heartbeats_from_older_workers_still_decode():
    old = b'{"id":"w","host":"h","pid":1,"models":{"m":"s"},"concurrency":16,"started_ms":1,"beat_ms":2}'
    beat = msgspec.json.decode(old, type=Heartbeat)
    assert (beat.busy, beat.jobs_done, beat.errors) == (0, 0, 0)


def _status(worker_id: str, message: str, viewer: str | None = None) -> Status:
    from api.workload import system

    recent = Recent()
    recent.error(400, message, "<job>", "<route>", "<client>")
    worker = WorkerRow(worker_id, "h", 1, {"m<": "a" * 64}, 0.4, 1, 2, 16, 10, 1, 0, 0)
    whole, per_second = system({}, 1_000_000)
    return Status(0, "ok", 0, viewer, [worker], [QueueRow("m<", 3, 1)], whole, per_second,
                  Minute(60, 0, 0.0, 0, None, None), recent.seconds(), recent.errors())


def test_page_escapes_what_it_shows_and_its_policy_allows_only_its_own_script():
    page = render_page(_status('<img src=x onerror="alert(1)">', "<script>alert(2)</script>", "<i>")).decode()
    assert "<img" not in page and "<script>alert" not in page and "&lt;script&gt;" in page
    assert "&lt;route&gt;" in page and "&lt;i&gt;" in page and "<i>" not in page
    for tag in ("script", "style"):
        inline = re.search(f"<{tag}>(.*?)</{tag}>", page, re.S).group(1)
        digest = base64.b64encode(hashlib.sha256(inline.encode()).digest()).decode()
        assert f"{tag}-src 'sha256-{digest}'" in CSP
    assert len(page) < 12_000  # a few KB of inline CSS and JS at most


def test_openapi_documents_the_status_json():
    from api.openapi import openapi_document

    doc = json.loads(openapi_document())
    assert {"/status", "/status.json"} <= set(doc["paths"])
    schema = doc["paths"]["/status.json"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/Status"}
    assert {"workers", "queues", "system", "system_seconds", "minute", "seconds", "recent_errors", "viewer"} \
        <= set(doc["components"]["schemas"]["Status"]["properties"])


@pytest.mark.slow  # waits out Redis connection timeouts
def test_page_renders_with_redis_down_and_says_so():
    from redis.asyncio import Redis
    from starlette.testclient import TestClient

    from api.app import create_app
    from api.server import state_factory
    from derender_queue.settings import Settings

    down = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=0.5, socket_timeout=0.5)
    with TestClient(create_app(state_factory(Settings(), down, down))) as client:
        page = client.get("/status")
        assert page.status_code == 200 and "Redis <span class=\"bad\">unreachable" in page.text
        status = client.get("/status.json").json()
        assert status["redis"].startswith("unreachable") and status["queues"][0]["depth"] is None


def _load(url: str, stop: threading.Event, body: bytes) -> None:
    while not stop.is_set():
        post(url + CHAT, body, AUTH, timeout=30)


def _good(tag: str) -> bytes:
    return json.dumps({"generate_response": {"request_id": tag, "choices": [
        {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}]}}).encode()


BAD = json.dumps({"generate_response": {"request_id": "bad", "choices": [
    {"index": 0, "token_ids": [10**9], "finish_reason": "stop"}]}}).encode()

_READ_PAGE = """
const cells = (sel, f) => [...document.querySelectorAll(sel)].map(f);
const d = sel => { const p = document.querySelector(sel); return p ? p.getAttribute('d') : null; };
return {
  marker: window.__marker || null, updated: document.getElementById('updated').textContent,
  stale: document.getElementById('stale').textContent,
  workers: cells('#workers tr.worker', r => ({id: r.dataset.id, done: +r.querySelector('.done').textContent,
                                              c4: +r.querySelector('.c4').textContent,
                                              rate: +(r.querySelector('.rate')?.textContent ?? 0)})),
  queues: cells('#queues tr.queue', r => ({model: r.dataset.model, depth: r.querySelector('.depth').textContent})),
  errors: cells('#errors tr.error', r => [...r.cells].map(c => c.textContent)),
  rate: d('#chart-rate path.requests'), p99: d('#chart-latency path.p99'),
  jobs: d('#chart-jobs path.jobs'), tokens: d('#chart-tokens path.tokens'), wait: d('#chart-wait path.p50'),
  // the system charts side by side across the page, not a column down its left half
  tops: cells('#chart-jobs, #chart-tokens, #chart-wait', f => Math.round(f.getBoundingClientRect().top)),
  span: ((document.getElementById('chart-wait')?.getBoundingClientRect().right ?? 0)
         - (document.getElementById('chart-jobs')?.getBoundingClientRect().left ?? 0)) / document.body.clientWidth,
};
"""


def _heights(path: str | None) -> list[float]:
    return [float(y) for y in re.findall(r"[ML][\d.]+ ([\d.]+)", path or "")]


def _get(url: str, headers: dict[str, str]) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_status_page_in_chromium_with_two_workers_under_load(redis_server, prefix, tmp_path):
    binaries = chromium_binaries()
    if binaries is None:
        if os.environ.get("DERENDER_REQUIRE_CHROMIUM") == "1":  # .ci/run installed them: never skip there
            pytest.fail("DERENDER_REQUIRE_CHROMIUM is set but chromium or chromedriver is missing")
        pytest.skip("no Chromium: apt-get install chromium chromium-driver (.ci/run installs them)")
    # Few slots and a short per-job delay: the load keeps a visible queue.
    env = {"DERENDER_API_KEYS": f"ops:{TOKEN}", "DERENDER_OPERATOR_KEYS": "ops", "DERENDER_CONCURRENCY": "2",
           "DERENDER_DEBUG_JOB_DELAY_S": "0.05"}
    s = Stack(redis_server.url, prefix, workers=2, extra_env=env)
    s.start_api()
    s.start_worker()
    s.start_worker()
    stop, threads, browser = threading.Event(), [], None
    try:
        wait_until(lambda: len(get_json_auth(s.url + "/status.json")["workers"]) == 2, 60, what="two workers")
        assert _get(s.url + "/status", {}) == 401 and _get(s.url + "/status.json", {}) == 401
        assert _get(s.url + "/health", {}) == 200
        worker_ids = {w["id"] for w in get_json_auth(s.url + "/status.json")["workers"]}
        threads = [threading.Thread(target=_load, args=(s.url, stop, _good(f"g{i}")), daemon=True) for i in range(6)]
        threads.append(threading.Thread(target=_load, args=(s.url, stop, BAD), daemon=True))
        for t in threads:
            t.start()

        browser = Browser(*binaries, height=1500)  # tall enough for the whole page in the screenshot
        browser.cdp("Network.enable")
        browser.cdp("Network.setExtraHTTPHeaders", headers=AUTH)  # like a proxy adding the operator's key
        browser.get(s.url + "/status")
        browser.run("window.__marker = 'first load';")

        def page():
            view = browser.run(_READ_PAGE)
            assert view["marker"] == "first load", "the page reloaded instead of refreshing in place"
            return view

        first = wait_until(lambda: (v := page()) and {w["id"] for w in v["workers"]} == worker_ids and v,
                           30, what="both worker rows")
        assert [q["model"] for q in first["queues"]] == ["deepseek-v4"]
        wait_until(lambda: int(page()["queues"][0]["depth"]) > 0, 30, what="a queue under load")
        done = {w["id"]: w["done"] for w in first["workers"]}
        view = wait_until(lambda: (v := page()) and all(w["done"] > done[w["id"]] for w in v["workers"]) and v,
                          30, what="both workers' jobs done to grow on the page")
        assert view["updated"] != first["updated"] and not view["stale"]
        view = wait_until(lambda: (v := page()) and min(_heights(v["rate"]), default=90) < 80
                          and _heights(v["p99"]) and v["errors"] and v, 30, what="charts and errors")
        route, status_code, client = view["errors"][0][1:4]
        assert (route, status_code, client) == ("chat", "400", "ops"), view["errors"]
        assert any("vocabulary" in e[-1] for e in view["errors"]), view["errors"]
        wait_until(lambda: page()["rate"] != view["rate"], 30, what="the request chart to move")
        view = wait_until(lambda: (v := page()) and all(w["rate"] > 0 for w in v["workers"])
                          and min(_heights(v["jobs"]), default=100) < 80 and _heights(v["tokens"])
                          and _heights(v["wait"]) and v, 30, what="the workers' rates and charts")
        assert len(set(view["tops"])) == 1 and view["span"] > 0.9, (view["tops"], view["span"])
        wait_until(lambda: page()["jobs"] != view["jobs"], 30, what="the workers' chart to move")
        status = get_json_auth(s.url + "/status.json")
        assert sum(w["client_errors"] for w in status["workers"]) > 0 and status["minute"]["requests"] > 0
        assert status["recent_errors"][0]["job_id"] and status["minute"]["p99_ms"] > 0
        assert status["system"]["tokens"] > 0 and status["system"]["wait_p99_ms"] > 0
        browser.screenshot(os.environ.get("DERENDER_STATUS_SCREENSHOT") or str(tmp_path / "status.png"))

        stop.set()
        for t in threads:
            t.join(35)
        # Jobs no HTTP request brought: a producer on Redis. The workers' side counts them.
        asyncio.run(_produce(redis_server.url, prefix, PRODUCED))
        wait_until(lambda: (v := get_json_auth(s.url + "/status.json"))["system"]["jobs"]
                   >= v["minute"]["requests"] + PRODUCED, 30, what="the producer's jobs on the workers' side")
        wait_until(lambda: page()["queues"][0]["depth"] == "0", 30, what="the queue to drain on the page")
    finally:
        stop.set()
        if browser is not None:
            browser.close()
        s.close()


PRODUCED = 40


async def _produce(redis_url: str, prefix: str, n: int) -> None:
    from derender_queue.wire.client import DerenderClient

    async with DerenderClient(redis_url, key_prefix=prefix) as client:
        answers = await asyncio.gather(*(client.derender_chat(_good(f"p{i}")) for i in range(n)))
    assert all(a["choices"][0]["message"]["content"] == "Hello, world!" for a in answers)


def get_json_auth(url: str) -> dict:
    with urllib.request.urlopen(urllib.request.Request(url, headers=AUTH), timeout=10) as r:
        return json.loads(r.read())

