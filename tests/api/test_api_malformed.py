"""Hostile HTTP clients against the real API process (uvicorn + httptools):
malformed bodies are a 400 in vLLM's shape on a connection that stays open,
content types are checked as vLLM 0.33 checks them, a client leaving
mid-upload is one info line and a metric, and an unexpected exception in a
route is a 500 in vLLM's shape, logged with its request id (issue 12, items
6, 12, 14)."""

from __future__ import annotations

import http.client
import json
import logging
import socket

import fakeredis
import pytest
from starlette.testclient import TestClient

from api import metrics as api_metrics
from api.app import create_app
from api.server import state_factory
from derender_queue.settings import Settings
from tests.helpers.stack import Stack, get_json, metric, post, wait_until

CHAT = "/v1/chat/completions/derender"
GOOD = json.dumps({"model": "deepseek-v4", "generate_response": {"request_id": "g", "choices": [
    {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}]}}).encode()

MALFORMED = {
    "nested 1500 deep, model not first": b'{"x": ' + b"[" * 1500 + b"]" * 1500 + b', "model": "deepseek-v4"}',
    "nested 100000 deep, model not first": b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "leading model with \\q": b'{"model": "deep\\qseek", "generate_response": {}}',
    "leading model with a lone \\ud800": b'{"model": "\\ud800", "generate_response": {}}',
    "leading model with raw ff fe": b'{"model": "\xff\xfe", "generate_response": {}}',
    "model not first, with a lone \\ud800": b'{"generate_response": {}, "model": "\\ud800"}',
}


@pytest.fixture(scope="module")
def api(redis_server, tmp_path_factory):
    """The API alone (no worker): every case here is answered before a job runs."""
    s = Stack(redis_server.url, "malformed", workers=0, log_dir=str(tmp_path_factory.mktemp("logs"))).start()
    yield s
    s.close()


def _vllm_error(body: bytes, status: int) -> dict:
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == status, error
    return error


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_body_is_400_and_the_connection_stays_open(api, name):
    conn = http.client.HTTPConnection("127.0.0.1", api.api_port, timeout=30)
    try:
        conn.request("POST", CHAT, MALFORMED[name], {"content-type": "application/json"})
        response = conn.getresponse()
        body = response.read()
        sock = conn.sock
        assert response.status == 400, (response.status, body[:300])
        assert response.getheader("connection") != "close"
        _vllm_error(body, 400)
        # The same connection serves the next request (it was not dropped).
        conn.request("GET", "/health")
        again = conn.getresponse()
        assert again.status == 200 and json.loads(again.read()) == {"status": "ok"}
        assert conn.sock is sock
    finally:
        conn.close()


@pytest.mark.parametrize(("content_type", "accepted"), [
    ("text/plain", False), (None, False), ("application/x-www-form-urlencoded", False),
    ("application/json-seq", False), ("application/jsonl", False),
    ("application/json", True), ("application/json; charset=utf-8", True), ("Application/JSON", True),
])
def test_content_type_is_checked_like_vllm(api, content_type, accepted):
    """vLLM 0.33's `validate_json_request`: the media type before any `;`,
    lower-cased, must be exactly application/json (a missing header too is
    refused). Checked on the derender routes and on /v1/jobs."""
    for path in (CHAT, "/v1/completions/derender", "/v1/jobs"):
        conn = http.client.HTTPConnection("127.0.0.1", api.api_port, timeout=30)
        try:
            # An unknown model: a body that passes the content-type check is a 404, never enqueued.
            body = b'{"model": "no-such-model", "generate_response": {"choices": []}}'
            headers = {"content-length": str(len(body))}
            if content_type is not None:
                headers["content-type"] = content_type
            conn.putrequest("POST", path, skip_accept_encoding=True)
            for k, v in headers.items():
                conn.putheader(k, v)
            conn.endheaders(body)
            response = conn.getresponse()
            out = response.read()
        finally:
            conn.close()
        if accepted:
            assert response.status == 404, (path, content_type, response.status, out)
        else:
            assert response.status == 400, (path, content_type, response.status, out)
            assert _vllm_error(out, 400)["message"] == (
                "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed")


def test_client_leaving_mid_upload_is_one_info_line_and_a_metric(api):
    before = metric(api.url + "/metrics", "derender_api_client_disconnects_total")
    sock = socket.create_connection(("127.0.0.1", api.api_port), timeout=10)
    sock.sendall(b"POST /v1/chat/completions/derender HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                 b"content-length: 1000000\r\n\r\n" + b'{"model": "deepseek-v4", "pad": "' + b"x" * 20_000)
    wait_until(lambda: metric(api.url + "/metrics", "derender_api_requests_in_flight") >= 2, 30,
               what="the upload being read")
    sock.close()  # (in flight: the upload and the /metrics request asking)
    wait_until(lambda: metric(api.url + "/metrics", "derender_api_client_disconnects_total") >= before + 1, 30,
               what="the disconnect counted")
    with open(f"{api.log_dir}/api-0.log", encoding="utf-8") as f:
        log = f.read()
    assert "Traceback" not in log and "Exception in ASGI application" not in log, log[-3000:]
    lines = [json.loads(line) for line in log.splitlines() if "client disconnected" in line]
    assert len(lines) >= 1 and {line["level"] for line in lines} == {"info"}
    # Still serving.
    assert get_json(api.url + "/health")[0] == 200
    assert post(api.url + CHAT, b"[1]")[0] == 400


def test_unexpected_exception_in_a_route_is_a_500_in_vllm_shape_logged_with_its_request_id(monkeypatch, caplog):
    app = create_app(state_factory(Settings(), redis=fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())))
    with TestClient(app, raise_server_exceptions=True) as client:
        async def broken(*args, **kwargs):
            raise RuntimeError("a bug")

        monkeypatch.setattr(app.state.api.queue, "submit", broken)
        counted = api_metrics.REQUESTS.labels("jobs_submit", "500")._value.get()
        with caplog.at_level(logging.ERROR, logger="derender.api"):
            response = client.post("/v1/jobs", content=GOOD,
                                   headers={"content-type": "application/json", "x-request-id": "req-500-a"})
    assert response.status_code == 500
    error = _vllm_error(response.content, 500)
    assert "req-500-a" in error["message"] and "a bug" not in error["message"]
    assert response.headers["x-request-id"] == "req-500-a"
    assert api_metrics.REQUESTS.labels("jobs_submit", "500")._value.get() == counted + 1
    records = [r for r in caplog.records if getattr(r, "request_id", None) == "req-500-a"]
    assert records and records[0].exc_info is not None
