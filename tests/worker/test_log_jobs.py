"""DERENDER_LOG_JOBS: at the default log level a successful job leaves one
worker log line carrying its job id and the caller's request id, so a
request can be followed from the API into the worker (docs/observability.md)."""

from __future__ import annotations

import glob
import json

import pytest

from tests.helpers.stack import Stack, post

CHAT = json.dumps({"generate_response": {"request_id": "lj", "choices": [
    {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}]}}).encode()


def finished_lines(log_dir) -> list[dict]:
    lines = []
    for path in glob.glob(f"{log_dir}/worker-*.log"):
        with open(path, encoding="utf-8") as f:
            lines += [json.loads(line) for line in f if '"job finished"' in line]
    return lines


@pytest.mark.parametrize("log_jobs", ["1", "0"])
def test_log_jobs_logs_every_successful_job_at_info(redis_server, prefix, tmp_path, log_jobs):
    s = Stack(redis_server.url, prefix, workers=1, log_dir=str(tmp_path),
              extra_env={"DERENDER_LOG_LEVEL": "info", "DERENDER_LOG_JOBS": log_jobs}).start()
    try:
        status, _, headers = post(s.url + "/v1/chat/completions/derender", CHAT, {"x-request-id": "follow-me"})
        assert status == 200 and headers["x-request-id"] == "follow-me"
    finally:
        s.close()  # the worker has exited: every line it logged is in its file
    lines = finished_lines(tmp_path)
    if log_jobs == "0":
        assert lines == [], "off by default: no line per successful job"
        return
    assert len(lines) == 1, lines
    line = lines[0]
    assert line["level"] == "info" and line["request_id"] == "follow-me" and line["status"] == 200
    assert line["job_id"] and line["model"] == "deepseek-v4" and line["endpoint"] == "chat"


def test_a_field_a_producer_chose_is_cut_in_the_log_line():
    """A raw producer's job id or a client's request id may be any length: a
    megabyte id was a megabyte log line (issue 31 item 10's follow-up)."""
    import logging

    from derender_queue.logs import JsonFormatter

    record = logging.LogRecord("derender.worker", logging.INFO, __file__, 1, "job finished", None, None)
    record.job_id = "s0." + "x" * 1_000_000
    line = JsonFormatter().format(record)
    assert len(line) < 1000 and json.loads(line)["job_id"].endswith("...(1000003 chars)")
