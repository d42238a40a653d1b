"""`/v1/jobs` against a real redis-server and real API and worker processes:
idempotency is bound to its job atomically, a live job is never "unknown",
another client's job is a 404 throughout, an owner is only believed when the
API signed it, and a wrong-typed wake or queue key never makes every submit
fail (issue 12, items 3, 7, 8, 13)."""

from __future__ import annotations

import http.client
import json
import signal
import threading
import time

import pytest
import redis

from derender_queue.wire.keys import Keys, now_ms, random_id
from tests.helpers.keyed_stack import ALICE, BOB, KEYS, fetch, start_keyed
from tests.helpers.procs import stat
from tests.helpers.redis_process import RedisProcess
from tests.helpers.stack import Stack, get_json, post, wait_until


def chat_body(tag: str, tokens: int = 5) -> bytes:
    ids = ([19923, 14, 2058, 3, 1] * tokens)[:tokens]
    return json.dumps({"generate_response": {"request_id": tag, "choices": [
        {"index": 0, "token_ids": ids, "finish_reason": "stop"}]}}).encode()


def submit(stack: Stack, body: bytes, headers: dict[str, str] | None = None, endpoint: str = "chat") -> str:
    status, out, _ = post(f"{stack.url}/v1/jobs?endpoint={endpoint}", body, headers)
    assert status == 202, (status, out)
    return json.loads(out)["id"]


# ---------------------------------------------------------------- item 7: idempotency


def test_idempotent_retry_after_a_redis_stall_names_a_job_that_exists(prefix, tmp_path):
    """The first try meets a stopped Redis (503); once Redis is back, the
    retry with the same key and body must name a job that exists and runs."""
    with RedisProcess() as server:
        s = Stack(server.url, prefix, workers=1).start()
        try:
            headers = {"idempotency-key": "stall-1"}
            body = chat_body("stall")
            server.proc.send_signal(signal.SIGSTOP)
            # The signal is delivered when the kernel next schedules Redis: on a busy machine the
            # submit could be served first (it was once: 202 where 503 was due).
            wait_until(lambda: (stat(server.proc.pid) or ("",))[0] == "T", 10, what="Redis stopped")
            try:
                status, out, _ = post(s.url + "/v1/jobs?endpoint=chat", body, headers, timeout=30)
            finally:
                server.proc.send_signal(signal.SIGCONT)
            assert status == 503, (status, out)
            wait_until(lambda: redis.Redis.from_url(server.url).ping(), 10, what="Redis back")
            job_id = submit(s, body, headers)

            def settled():
                status, out = get_json(f"{s.url}/v1/jobs/{job_id}")
                assert status != 404, f"the retry named a job that does not exist: {out}"
                return out["status"] == "done" and out

            assert wait_until(settled, 30, what="the job done")["result"]["object"] == "chat.completion"
        finally:
            s.close()


@pytest.fixture(scope="module")
def keyed(redis_server):
    """API keys alice and bob, one worker."""
    s = start_keyed(Stack(redis_server.url, "jobs", workers=1, extra_env={"DERENDER_API_KEYS": KEYS}))
    yield s
    s.close()


def test_same_idempotency_key_with_another_body_or_endpoint_is_409(keyed):
    headers = {**ALICE, "idempotency-key": "k-409"}
    first = submit(keyed, chat_body("i1"), headers)
    assert submit(keyed, chat_body("i1"), headers) == first
    status, out, _ = post(keyed.url + "/v1/jobs?endpoint=chat", chat_body("i2"), headers)
    assert status == 409 and json.loads(out)["error"]["code"] == 409
    status, out, _ = post(keyed.url + "/v1/jobs?endpoint=completion", chat_body("i1"), headers)
    assert status == 409 and json.loads(out)["error"]["code"] == 409, (status, out)
    # Scoped per client: bob's same key is his own job.
    assert submit(keyed, chat_body("i1"), {**BOB, "idempotency-key": "k-409"}) != first


# ---------------------------------------------------------------- item 8: never "unknown" while live


def test_a_live_job_is_never_unknown(keyed):
    """Each of many jobs is polled as fast as possible from submit to done:
    the finish (result written, job deleted in one MULTI) must never show
    as a 404 between the two."""
    unknown: list[tuple[str, dict]] = []
    done = []
    lock = threading.Lock()

    def poller(n: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", keyed.api_port, timeout=30)
        for i in range(n):
            body = chat_body(f"race{i}", tokens=40)
            conn.request("POST", "/v1/jobs?endpoint=chat", body, {**ALICE, "content-type": "application/json"})
            job_id = json.loads(conn.getresponse().read())["id"]
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                conn.request("GET", f"/v1/jobs/{job_id}", headers=ALICE)
                response = conn.getresponse()
                out = json.loads(response.read())
                if response.status == 404:
                    with lock:
                        unknown.append((job_id, out))
                    break
                if out["status"] != "pending":
                    with lock:
                        done.append(job_id)
                    break
        conn.close()

    threads = [threading.Thread(target=poller, args=(25,)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not unknown, f"{len(unknown)} of {len(unknown) + len(done)} live jobs answered 404: {unknown[:3]}"
    assert len(done) == 150


# ---------------------------------------------------------------- item 13 + item 3 (owner)


def test_another_clients_job_is_404_while_pending_and_once_done(redis_server, prefix):
    s = start_keyed(Stack(redis_server.url, prefix, workers=0, extra_env={"DERENDER_API_KEYS": KEYS}))
    try:
        job_id = submit(s, chat_body("own"), ALICE)
        assert fetch(f"{s.url}/v1/jobs/{job_id}", ALICE) == (200, {"id": job_id, "status": "pending"})
        status, out = fetch(f"{s.url}/v1/jobs/{job_id}", BOB)
        assert (status, out["status"]) == (404, "unknown"), (status, out)
        s.start_worker()
        wait_until(lambda: fetch(f"{s.url}/v1/jobs/{job_id}", ALICE)[1]["status"] == "done", 60, what="done")
        status, out = fetch(f"{s.url}/v1/jobs/{job_id}", BOB)
        assert (status, out["status"]) == (404, "unknown"), (status, out)
    finally:
        s.close()


def _write(r: redis.Redis, key: str, envelope: dict, body: bytes, head: bytes = b"") -> None:
    """What a producer on Redis can write: any envelope it likes."""
    r.set(key, head + json.dumps(envelope, separators=(",", ":")).encode() + b"\n" + body, px=60_000)


def test_an_owner_is_believed_only_when_the_api_signed_it(keyed):
    """A producer writing Redis directly can put any `owner` in a job or a
    result; the API ignores an owner it did not sign (the result is then no
    one's: whoever holds the id reads it, as with any producer's job), so a
    forged owner never scopes anything."""
    r = redis.Redis.from_url(keyed.redis_url)
    keys = Keys(keyed.prefix)
    # A result forged with owner "alice" and no signature: not alice's.
    forged = "s0." + random_id()
    _write(r, keys.job(forged), {"v": 1, "id": forged, "status": 200, "finished_ms": now_ms(), "owner": "alice"},
           b'{"forged": true}')
    assert fetch(f"{keyed.url}/v1/jobs/{forged}", BOB) == (
        200, {"id": forged, "status": "done", "http_status": 200, "result": {"forged": True}})
    # A real job of alice's: hers alone, before and after it finishes.
    mine = submit(keyed, chat_body("signed"), ALICE)
    wait_until(lambda: fetch(f"{keyed.url}/v1/jobs/{mine}", ALICE)[1]["status"] == "done", 60, what="done")
    assert fetch(f"{keyed.url}/v1/jobs/{mine}", BOB)[0] == 404
    real = json.loads(r.get(keys.job(mine)).split(b"\n", 1)[0])
    assert real["owner"] == "alice" and len(real["owner_sig"]) == 64
    # Alice's real signature copied onto another job id: it signs that job only.
    copied = "s0." + random_id()
    _write(r, keys.job(copied), {"v": 1, "id": copied, "status": 200, "finished_ms": now_ms(), "owner": "alice",
                                    "owner_sig": real["owner_sig"]}, b'{"forged": true}')
    assert fetch(f"{keyed.url}/v1/jobs/{copied}", BOB)[0] == 200
    # A job enqueued straight into Redis claiming alice: pending for anyone with the id.
    pending = "s0." + random_id()
    _write(r, keys.job(pending), {"v": 2, "id": pending, "endpoint": "chat", "model": "nowhere",
                                     "enqueued_ms": now_ms(), "owner": "alice", "owner_sig": real["owner_sig"]},
           b"", head=b"P")
    assert fetch(f"{keyed.url}/v1/jobs/{pending}", BOB) == (200, {"id": pending, "status": "pending"})
