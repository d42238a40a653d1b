"""The API's small shapes (issue 32 item 6): every answer, a route that does
not exist or a method a route does not take included, is vLLM's error shape;
`POST /v1/jobs` without `?endpoint=` is a chat job, as documented; a reused
Idempotency-Key is a 409 typed as a conflict; `derender chat` says what a
call costs. In process, on fakeredis."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import fakeredis
import pytest
from starlette.testclient import TestClient

from api.app import create_app
from api.server import state_factory
from derender_queue.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CHAT = {"generate_response": {"request_id": "r", "choices": [
    {"index": 0, "token_ids": [19923], "finish_reason": "stop"}]}}


@pytest.fixture
def client():
    redis = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())
    with TestClient(create_app(state_factory(Settings(), redis=redis))) as c:
        yield c


def _vllm_shape(response, status: int, kind: str) -> dict:
    assert response.status_code == status and response.headers["content-type"] == "application/json", response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == status, error
    assert error["type"] == kind, error
    return error


def test_an_unknown_route_is_vllms_404(client):
    # vLLM's HTTPException handler: the status phrase is both message and type.
    error = _vllm_shape(client.get("/v1/nothing-here"), 404, "Not Found")
    assert error["message"] == "Not Found" and error["param"] is None


def test_a_wrong_method_is_vllms_405_with_allow(client):
    response = client.get("/v1/chat/completions/derender")
    error = _vllm_shape(response, 405, "Method Not Allowed")
    assert error["message"] == "Method Not Allowed" and response.headers["allow"] == "POST"


def test_a_reused_idempotency_key_is_a_conflict(client):
    headers = {"idempotency-key": "k1"}
    assert client.post("/v1/jobs", json=CHAT, headers=headers).status_code == 202
    other = {**CHAT, "x": 1}
    error = _vllm_shape(client.post("/v1/jobs", json=other, headers=headers), 409, "ConflictError")
    assert "Idempotency-Key" in error["message"]


def test_a_job_without_endpoint_is_a_chat_job_as_documented(client):
    answer = client.post("/v1/jobs", json=CHAT)
    assert answer.status_code == 202
    job_id = answer.json()["id"]
    found = client.portal.call(client.app.state.api.queue.lookup, job_id)
    assert found.pending and found.job is not None and found.job.endpoint == "chat"
    page = (ROOT / "docs" / "http-api.md").read_text()
    (row,) = [line for line in page.splitlines() if line.startswith("| `POST /v1/jobs?endpoint=")]
    assert re.search(r"without `endpoint`[^|]*`chat`", row), row


def test_derender_chat_says_each_call_loads_the_model():
    out = subprocess.run([sys.executable, "-m", "derender.cli", "chat", "--help"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert "loads" in out and "derender batch" in out, out
    readme = (ROOT / "README.md").read_text()
    (row,) = [line for line in readme.splitlines() if line.startswith("| `derender chat`")]
    assert "loads" in row and "batch" in row, row
