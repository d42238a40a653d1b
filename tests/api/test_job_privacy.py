"""No client reads another's job (issue 31 item 11), with real redis-server,
API and worker processes: a synchronous request that times out (504 with its
job id) is owned like a `/v1/jobs` job, so another key's GET of that id is the
404 an unknown id gets; and the status page shows a plain key only its own
job ids and error messages, an operator key (DERENDER_OPERATOR_KEYS) every
client's."""

from __future__ import annotations

import json

from tests.helpers.keyed_stack import ALICE, BOB, KEYS, fetch, start_keyed
from tests.helpers.stack import Stack, post, wait_until

OPS = {"authorization": "Bearer ops-0123456789abcdefgh"}
CHAT = "/v1/chat/completions/derender"
BAD = json.dumps({"generate_response": {"request_id": "bad", "choices": [
    {"index": 0, "token_ids": [10**9], "finish_reason": "stop"}]}}).encode()


def _good(tag: str) -> bytes:
    return json.dumps({"generate_response": {"request_id": tag, "choices": [
        {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}]}}).encode()


def test_timed_out_requests_are_owned_and_status_shows_each_key_its_own(redis_server, prefix):
    # Every job outlives the 1 s request timeout: each synchronous request is a 504 naming its job.
    env = {"DERENDER_API_KEYS": f"{KEYS},ops:ops-0123456789abcdefgh", "DERENDER_OPERATOR_KEYS": "ops",
           "DERENDER_REQUEST_TIMEOUT_S": "1", "DERENDER_DEBUG_JOB_DELAY_S": "1.5"}
    s = start_keyed(Stack(redis_server.url, prefix, workers=1, extra_env=env))
    try:
        status, out, _ = post(s.url + CHAT, _good("alice"), ALICE)
        assert status == 504, (status, out)
        alice_job = json.loads(out)["job_id"]
        status, out, _ = post(s.url + CHAT, BAD, BOB)
        assert status == 504, (status, out)
        bob_job = json.loads(out)["job_id"]

        done = wait_until(lambda: (r := fetch(f"{s.url}/v1/jobs/{alice_job}", ALICE)[1])["status"] == "done" and r,
                          30, what="Alice's job done")
        assert done["result"]["choices"][0]["message"]["content"] == "Hello, world!"
        assert fetch(f"{s.url}/v1/jobs/{alice_job}", BOB) == (404, {"id": alice_job, "status": "unknown"})
        assert fetch(f"{s.url}/v1/jobs/{bob_job}", ALICE)[0] == 404
        wait_until(lambda: fetch(f"{s.url}/v1/jobs/{bob_job}", BOB)[1]["status"] == "error", 30, what="Bob's error")

        for key, own, other in ((ALICE, alice_job, bob_job), (BOB, bob_job, alice_job)):
            page = _page(s.url + "/status", key)
            _, view = fetch(s.url + "/status.json", key)
            shown = json.dumps(view)
            assert own in page and own in shown, "a key sees its own job ids"
            assert other not in page and other not in shown, "a plain key sees another client's job id"
            assert len(view["recent_errors"]) == 1 and view["recent_errors"][0]["job_id"] == own
        for route in ("/status", "/status.json"):
            text = _page(s.url + route, OPS)
            assert alice_job in text and bob_job in text, "an operator sees every client's errors"
        _, view = fetch(s.url + "/status.json", OPS)
        assert sorted(e["client"] for e in view["recent_errors"]) == ["alice", "bob"]
    finally:
        s.close()


def _page(url: str, headers: dict[str, str]) -> str:
    import urllib.request

    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
        return r.read().decode()
