"""bench/soak.py's bookkeeping, with a scripted API connection: what counts
as completed, errored or lost must come from this request's own answer."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

import soak  # bench/ is not a package: imported from its folder

EXPECTED = {"object": "chat.completion", "choices": []}
POOL = [("chat", b"{}", EXPECTED)]


class Scripted:
    """A Connection whose answers are scripted: (status, body) or an exception."""

    def __init__(self, answers: list) -> None:
        self.answers = answers

    @classmethod
    def factory(cls, answers: list):
        async def open_(host: str, port: int) -> Scripted:
            return cls(answers)
        return open_

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def close(self) -> None:
        pass


def drive(answers: list, jobs: int) -> soak.Outcome:
    out = soak.Outcome()

    async def no_faults(i: int) -> None:
        return None

    connection = SimpleNamespace(open=Scripted.factory(answers))
    original, soak.Connection = soak.Connection, connection
    try:
        asyncio.run(soak.drive(SimpleNamespace(api_port=0), POOL, jobs, 1, out, no_faults))
    finally:
        soak.Connection = original
    return out


def test_a_connection_error_is_not_the_previous_answer_again():
    out = drive([(200, json.dumps(EXPECTED).encode()), ConnectionResetError("reset")], jobs=2)
    assert out.sent == 2
    assert out.completed == 1, "the second request got no answer: it did not complete"
    assert out.errors == {"connection": 1}


def test_a_timed_out_job_that_ended_in_an_error_is_an_error_not_a_success():
    out = soak.Outcome(timed_out=[("j-error", EXPECTED), ("j-done", EXPECTED), ("j-gone", EXPECTED)])
    answers = {
        "j-error": {"status": "error", "http_status": 500, "error_response": {"error": {"message": "boom"}}},
        "j-done": {"status": "done", "result": {**EXPECTED, "id": "x", "created": 1}},
        "j-gone": {"status": "unknown"},
    }
    soak.settle_timed_out(out, answers.__getitem__)
    assert out.errors == {"timed out, then 500": 1}
    assert out.late_completed == 1 and out.lost == 1 and out.mismatched == 0
