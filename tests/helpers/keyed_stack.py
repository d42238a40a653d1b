"""A stack with API keys: `Stack.start` waits on /ready unauthenticated, so
these start and wait with a key, and fetch with headers."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from tests.helpers.stack import Stack, wait_until

ALICE = {"authorization": "Bearer alice-0123456789abcdef"}
BOB = {"authorization": "Bearer bob-0123456789abcdefgh"}
KEYS = "alice:alice-0123456789abcdef,bob:bob-0123456789abcdefgh"


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def start_keyed(s: Stack) -> Stack:
    """Start `s` (its extra_env names DERENDER_API_KEYS=KEYS) and wait for its workers."""
    s.start_api()
    for _ in range(s.workers):
        s.start_worker()

    def ready() -> bool:
        status, body = fetch(s.url + "/ready", ALICE)
        return status == 200 and body["workers"] >= s.workers

    wait_until(ready, 60, what=f"{s.workers} live workers")
    return s
