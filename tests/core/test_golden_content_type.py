"""The two recorded content-type cases (`err_*_wrong_content_type`): vLLM
0.33 answers a body sent as `text/plain` with 400 "Unsupported Media Type".
The check belongs to the HTTP API (the core never sees headers), so the case
goes through the real ASGI app here, on fakeredis, with the queue's submit
replaced by a refusal: a request that passes the API's checks never waits
on a worker, it fails at once (an `Enqueued` error fails the test)."""

from __future__ import annotations

import json
from pathlib import Path

import fakeredis
import pytest
from starlette.testclient import TestClient

from api.app import create_app
from api.server import state_factory
from derender_queue.settings import Settings

GOLDEN = Path(__file__).parents[1] / "golden"
with open(GOLDEN / "cases_plain.jsonl", encoding="utf-8") as _lines:
    CASES = [c for c in (json.loads(line) for line in _lines) if "headers" in c]


class Enqueued(Exception):
    """The API let the body through to the queue."""


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_wrong_content_type_like_vllm(case, monkeypatch):
    assert case["status"] == 400
    app = create_app(state_factory(Settings(), redis=fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())))
    with TestClient(app, raise_server_exceptions=True) as client:
        async def refuse(*args, **kwargs):
            raise Enqueued
        monkeypatch.setattr(app.state.api.queue, "submit", refuse)
        response = client.post(case["path"], content=case["raw_request"].encode(), headers=case["headers"])
    assert response.status_code == case["status"]
    assert response.json()["error"]["message"] == case["response"]["error"]["message"]
