"""The queue path end to end: real redis-server, real `derender api` and
`derender worker` processes, talking HTTP and plain Redis on loopback."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest
import redis

from derender_queue.core import Derenderer
from derender_queue.wire.client import DerenderClient
from derender_queue.wire.envelope import JobEnvelope, pack
from derender_queue.wire.keys import Keys, now_ms, random_id
from tests.helpers.redis_process import free_port
from tests.helpers.stack import Stack, cli, get_json, post, stop, wait_until

CHAT = {"generate_response": {"request_id": "it-1", "choices": [
    {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop",
     "logprobs": {"content": [{"token_id": t, "logprob": -0.5, "top_logprobs": [
         {"token_id": t, "logprob": -0.5}, {"token_id": 16, "logprob": -3.0}]} for t in [19923, 14, 2058, 3, 1]]}}]},
    "chat_request": {"logprobs": True, "top_logprobs": 2}}
COMPLETION = {"generate_responses": [
    {"request_id": "it-2", "choices": [{"index": 0, "token_ids": [19923, 2058], "finish_reason": "length"}]},
    {"request_id": "it-3", "choices": [{"index": 0, "token_ids": [671, 4787], "finish_reason": "length"}]}]}


def _without_created(body: bytes) -> dict:
    data = json.loads(body)
    data.pop("created", None)
    return data


@pytest.fixture(scope="module")
def stack(redis_server):
    s = Stack(redis_server.url, "itq", workers=2).start()
    yield s
    s.close()


@pytest.fixture(scope="module")
def local(registry):
    return Derenderer(registry)


@pytest.mark.parametrize("endpoint,body,path", [
    ("chat", CHAT, "/v1/chat/completions/derender"),
    ("completion", COMPLETION, "/v1/completions/derender"),
])
def test_round_trip_equals_in_process_derender(stack, local, endpoint, body, path):
    raw = json.dumps(body).encode()
    status, out, headers = post(stack.url + path, raw, {"x-request-id": "req-42"})
    assert status == 200
    assert headers.get("x-request-id") == "req-42"
    assert _without_created(out) == _without_created(local.derender(endpoint, raw).body)


def test_errors_carried_through(stack):
    status, out, _ = post(stack.url + "/v1/chat/completions/derender",
                          b'{"model": "nope", "generate_response": {"choices": []}}')
    assert status == 404 and json.loads(out)["error"]["param"] == "model"
    body = {"generate_response": {"choices": [{"index": 0, "token_ids": [5, 999999]}]}}
    status, out, _ = post(stack.url + "/v1/chat/completions/derender", json.dumps(body).encode())
    assert status == 400 and "outside the vocabulary" in json.loads(out)["error"]["message"]
    status, out, _ = post(stack.url + "/v1/chat/completions/derender", b"[1, 2]")
    assert status == 400 and json.loads(out)["error"]["type"] == "BadRequestError"


def test_job_submit_and_fetch_with_idempotency(stack):
    raw = json.dumps(CHAT).encode()
    status, out, _ = post(stack.url + "/v1/jobs?endpoint=chat", raw, {"idempotency-key": "k1"})
    assert status == 202
    job_id = json.loads(out)["id"]
    status, again, _ = post(stack.url + "/v1/jobs?endpoint=chat", raw, {"idempotency-key": "k1"})
    assert status == 202 and json.loads(again)["id"] == job_id
    status, _conflict, _ = post(stack.url + "/v1/jobs?endpoint=chat", raw.replace(b"it-1", b"it-9"),
                                {"idempotency-key": "k1"})
    assert status == 409
    done = wait_until(lambda: (r := get_json(f"{stack.url}/v1/jobs/{job_id}")[1])["status"] == "done" and r,
                      what="job done")
    assert done["http_status"] == 200 and done["result"]["choices"][0]["message"]["content"] == "Hello, world!"
    # Results of /v1/jobs stay until their TTL: a second read sees the same.
    assert get_json(f"{stack.url}/v1/jobs/{job_id}")[1]["status"] == "done"


def test_unknown_job_is_unknown(stack):
    job_id = random_id()
    status, body = get_json(f"{stack.url}/v1/jobs/{job_id}")
    assert status == 404 and body == {"id": job_id, "status": "unknown"}


def test_two_workers_execute_each_job_exactly_once(stack):
    before = stack.worker_metric("derender_worker_jobs_total")
    jobs = 200

    async def main():
        async with DerenderClient(stack.redis_url, key_prefix=stack.prefix) as client:
            bodies = [dict(CHAT, generate_response=dict(CHAT["generate_response"], request_id=f"x{i}"))
                      for i in range(jobs)]
            return await asyncio.gather(*(client.derender_chat(b) for b in bodies))

    results = asyncio.run(main())
    assert sorted(r["id"] for r in results) == sorted(f"x{i}" for i in range(jobs))
    wait_until(lambda: stack.worker_metric("derender_worker_jobs_total") - before == jobs, 10, what="worker counts")
    time.sleep(0.5)  # nothing runs twice late
    assert stack.worker_metric("derender_worker_jobs_total") - before == jobs


def test_raw_redis_producer_without_arq(stack):
    """A producer in any language: SET the pending key, LPUSH the job onto its
    lane, then poll GET until the result replaces it (docs/wire-format.md)."""
    r = redis.Redis.from_url(stack.redis_url)
    job_id = "s0." + random_id()
    envelope = json.dumps({"v": 2, "id": job_id, "endpoint": "completion", "model": "deepseek-v4",
                           "enqueued_ms": int(time.time() * 1000)}, separators=(",", ":")).encode()
    body = json.dumps(COMPLETION).encode()
    p = stack.prefix
    with r.pipeline(transaction=False) as pipe:
        pipe.set(f"{p}:{{s0}}:job:{job_id}", b"P" + envelope + b"\n", px=60000)
        pipe.lpush(f"{p}:{{s0}}:lane:deepseek-v4", envelope + b"\n" + body)
        pipe.execute()
    value = wait_until(lambda: (v := r.get(f"{p}:{{s0}}:job:{job_id}")).startswith(b"{") and v, 10, 0.02, "result")
    head, _, out = value.partition(b"\n")
    meta = json.loads(head)
    assert meta["v"] == 1 and meta["status"] == 200 and meta["id"] == job_id  # results keep their v1 envelope
    assert len(meta["tokenizer_sha256"]) == 64
    assert [c["text"] for c in json.loads(out)["choices"]] == ["Hello world", "The quick"]


def test_a_lane_value_that_is_not_a_job_is_refused_and_the_workers_keep_serving(stack):
    r = redis.Redis.from_url(stack.redis_url)
    lane = Keys(stack.prefix).lane("s0", "deepseek-v4")
    def refused() -> float:  # dropped (no job to answer), or answered 400 (it names a job of the lane's shard)
        return sum(stack.worker_metric("derender_worker_job_start_failures_total", reason=reason)
                   for reason in ("unreadable", "malformed_job"))

    before = refused()
    for payload in (b"not json at all", b'{"v":1}\n{}',
                    pack(JobEnvelope(v=99, id="s0.x", endpoint="chat", model="deepseek-v4", enqueued_ms=now_ms()),
                         b"{}")):
        r.lpush(lane, payload)
    wait_until(lambda: refused() - before == 3, 10, 0.02, "refused, counted")
    status, _, _ = post(stack.url + "/v1/chat/completions/derender", json.dumps(CHAT).encode())
    assert status == 200


def test_models_and_ready_list_live_workers(stack):
    status, ready = get_json(stack.url + "/ready")
    assert status == 200 and ready["workers"] == 2 and ready["models"] == ["deepseek-v4"]
    status, models = get_json(stack.url + "/v1/models")
    assert models["object"] == "list" and [m["id"] for m in models["data"]] == ["deepseek-v4"]
    status, doc = get_json(stack.url + "/openapi.json")
    assert "/v1/chat/completions/derender" in doc["paths"] and "DerenderChatRequest" in doc["components"]["schemas"]


def test_client_disconnect_withdraws_its_queued_job(redis_server, prefix):
    """No worker runs, so the job waits in its lane; when the client hangs up
    the API withdraws it instead of leaving it to burn a worker later."""
    s = Stack(redis_server.url, prefix, workers=0).start()
    try:
        r = redis.Redis.from_url(redis_server.url)
        body = json.dumps(CHAT).encode()
        sock = socket.create_connection(("127.0.0.1", s.api_port))
        sock.sendall(b"POST /v1/chat/completions/derender HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                     b"content-length: %d\r\n\r\n%s" % (len(body), body))
        wait_until(lambda: len(list(r.scan_iter(f"{prefix}:*:job:*"))) == 1, 10, 0.02, "job queued")
        assert r.llen(Keys(prefix).lane("s0", "deepseek-v4")) == 1
        sock.close()
        # Its pending key gone: a worker that takes the value finds no key and answers nothing.
        wait_until(lambda: not list(r.scan_iter(f"{prefix}:*:job:*")), 10, 0.02, "job withdrawn")
    finally:
        s.close()


def test_wait_timeout_is_504_with_job_id(redis_server, prefix):
    s = Stack(redis_server.url, prefix, workers=0, extra_env={"DERENDER_REQUEST_TIMEOUT_S": "0.5"}).start()
    try:
        status, out, _ = post(s.url + "/v1/chat/completions/derender", json.dumps(CHAT).encode())
        data = json.loads(out)
        assert status == 504 and data["error"]["code"] == 504 and data["job_id"] in data["error"]["message"]
        # The id stays good: a worker reaching the job after its deadline
        # answers "expired" rather than spending CPU on it.
        s.start_worker()
        body = wait_until(lambda: (b := get_json(f"{s.url}/v1/jobs/{data['job_id']}")[1])["status"] == "error" and b,
                          30)
        assert body["http_status"] == 504 and "expired" in body["error_response"]["error"]["message"]
    finally:
        s.close()


@pytest.mark.slow  # starts `derender run` (no redis_server fixture)
def test_derender_run_without_redis_serves_real_requests():
    port = free_port()
    env = {"DERENDER_PORT": str(port), "DERENDER_REDIS_URL": ""}
    proc = cli("run", env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: get_json(url + "/ready")[1].get("workers") == 1, 60, what="embedded stack")
        status, out, _ = post(url + "/v1/chat/completions/derender", json.dumps(CHAT).encode())
        assert status == 200 and json.loads(out)["choices"][0]["message"]["content"] == "Hello, world!"
    finally:
        assert stop(proc) == 0
