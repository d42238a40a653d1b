"""README's and the docs pages' copy-paste recipes, run as written: each block
marked `<!-- recipe: NAME -->` in README.md or docs/*.md goes through bash
against a real stack (a private redis-server, real `derender api` and
`derender worker` processes, the `curl` and `redis-cli` binaries). Only the API's and Redis's port numbers are
changed, to the test's free ones (the recipes say 8000 and 6379). The raw v2
producer runs on a real Redis Cluster too (tests/helpers/redis_cluster.py).

A recipe may be followed by `<!-- answer: NAME -->` and its answer as the page
shows it: JSON values, each contained in what the recipe printed (an object
may leave keys out, such as `created` or the null fields; a list has all its
items)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import redis

from derender_queue.wire.cluster import slot_of
from tests.helpers.redis_process import RedisProcess
from tests.helpers.stack import Stack

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # real processes (docs/development.md: test tiers)
MARKER = re.compile(r"^<!-- recipe: ([\w-]+) -->\n((?:(?: {4}.*)?\n)+)", re.M)
ANSWER = re.compile(r"^<!-- answer: ([\w-]+) -->\n((?:(?: {4}.*)?\n)+)", re.M)
WITH_ANSWERS = ("completion-curl", "logprobs-curl", "step-curl")


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(pattern: re.Pattern[str], pages: list[Path] = PAGES) -> dict[str, str]:
    found: dict[str, str] = {}
    for page in pages:
        for m in pattern.finditer(page.read_text()):
            assert m.group(1) not in found, f"two blocks named {m.group(1)!r} (the second in {page.name})"
            found[m.group(1)] = textwrap.dedent(m.group(2)).strip() + "\n"
    return found


def recipes() -> dict[str, str]:
    found = blocks(MARKER)
    assert set(found) >= {"chat-curl", "sse-curl", "sse-request-event", "redis-cli-v2",
                          "derender-chat", *WITH_ANSWERS}, set(found)
    return found


def test_readme_itself_holds_the_request_to_paste():
    assert {"chat-curl", "derender-chat"} <= set(blocks(MARKER, [ROOT / "README.md"]))


def json_values(text: str) -> list[object]:
    decoder, values, at = json.JSONDecoder(), [], 0
    while (at := len(text) - len(text[at:].lstrip())) < len(text):
        value, at = decoder.raw_decode(text, at)
        values.append(value)
    return values


def contains(actual: object, shown: object) -> bool:
    if isinstance(shown, dict):
        return isinstance(actual, dict) and all(k in actual and contains(actual[k], v) for k, v in shown.items())
    if isinstance(shown, list):
        return isinstance(actual, list) and len(actual) == len(shown) and all(map(contains, actual, shown))
    return actual == shown


def test_every_answer_follows_its_recipe():
    assert set(blocks(ANSWER)) <= set(recipes()) and set(WITH_ANSWERS) <= set(blocks(ANSWER))


@pytest.fixture(scope="module")
def stack():
    for tool in ("curl", "redis-cli"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    server = RedisProcess().start()
    s = Stack(server.url, "derender", workers=1).start()  # the recipes use the default prefix
    yield s, server.port
    s.close()
    server.close()


@pytest.fixture(scope="module")
def cluster_stack(redis_cluster):
    """A worker on the session's cluster (default prefix), and the port of a
    master that does not serve the recipe's shard: redis-cli must follow MOVED."""
    if shutil.which("redis-cli") is None:
        pytest.skip("redis-cli is not installed")
    s = Stack(redis_cluster.url, "derender", workers=1).start()
    owner = redis_cluster.owner(slot_of("{s0-205}"))
    yield s, next(port for port in redis_cluster.masters() if port != owner), owner
    s.close()


def run(name: str, stack) -> str:
    s, redis_port = stack
    script = recipes()[name].replace("127.0.0.1:8000", f"127.0.0.1:{s.api_port}")
    script = script.replace("-p 6379", f"-p {redis_port}")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env=env)
    assert done.returncode == 0, f"{name}:\n{script}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def sse_text(out: str) -> tuple[str, list[str]]:
    events = [e.removeprefix("data: ") for e in out.split("\n\n") if e.strip()]
    text = "".join(c["delta"].get("content") or "" for e in events[:-1] for c in json.loads(e)["choices"])
    return text, events


def test_chat_curl(stack):
    assert json.loads(run("chat-curl", stack))["choices"][0]["message"]["content"] == "Hello, world!"


def test_sse_curl_gives_every_chunk(stack):
    text, events = sse_text(run("sse-curl", stack))
    assert text == "Hello, world!" and len(events) == 3 and events[-1] == "[DONE]", events


def test_sse_curl_with_the_request_event(stack):
    text, events = sse_text(run("sse-request-event", stack))
    assert text == "Hello," and events[-1] == "[DONE]", events


def v2_recipe_with_its_notification(stack, subscriber: redis.client.PubSub, tag: str) -> None:
    """The recipe's job is answered, and the notification docs/wire-format.md describes
    comes on its `reply_to` channel: `<id>\n<the value GET returned>`."""
    out = run("redis-cli-v2", stack)
    assert '"status":200' in out and "Hello, world!" in out, out
    message = None
    while message is None or message["type"] not in ("message", "smessage"):
        message = subscriber.get_message(timeout=30)
        assert message is not None, "no notification"
    job_id, _, value = message["data"].partition(b"\n")
    assert job_id.decode().startswith(f"{tag}.") and value.decode() + "\n" in out, (job_id, out)


def test_redis_cli_v2_producer(stack):
    _, port = stack
    with redis.Redis(port=port) as r, r.pubsub() as subscriber:
        subscriber.subscribe("derender:done:cli")
        v2_recipe_with_its_notification(stack, subscriber, "s0")


def test_redis_cli_v2_producer_on_a_cluster(cluster_stack):
    """Issue 31 item 6: as once written (tag `{s0}`, no `-c`), the job was
    refused with MOVED or, sent to its slot's master, never claimed."""
    s, port, owner = cluster_stack
    with redis.Redis(port=owner) as r, r.pubsub() as subscriber:
        subscriber.ssubscribe("derender:{s0-205}:done:cli")
        v2_recipe_with_its_notification((s, port), subscriber, "s0-205")


def test_derender_chat_from_stdin(stack):
    assert json.loads(run("derender-chat", stack))["choices"][0]["message"]["content"] == "Hello, world!"


@pytest.mark.parametrize("name", WITH_ANSWERS)
def test_recipe_answers_as_the_page_shows(stack, name):
    shown, got = json_values(blocks(ANSWER)[name]), json_values(run(name, stack))
    assert len(got) == len(shown) and all(map(contains, got, shown)), (got, shown)
