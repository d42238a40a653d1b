"""Realistic derender request bodies for benchmarks, different on every call.

Token ids come from encoding a mixed corpus (English, Python source, CJK,
emoji) with the model's tokenizer; each body takes a different slice and
fresh random logprob candidates, so nothing can be cached between runs.
"""

from __future__ import annotations

import inspect
import json
import random
import textwrap

PROSE = (
    "The derender step turns the integer token ids a generate server returns into the text, "
    "messages and log-probabilities an OpenAI-compatible client expects. It handles multi-byte "
    "characters split across tokens, stop strings and special tokens. Numbers like 3.14159 or "
    "2026-12-02, café, naïve, Größe, 東京タワーは高い。中文文本也很常见。 and emoji 🚀👩‍💻 appear too.\n"
)


def corpus_ids(tokenizer, min_len: int = 20000) -> list[int]:
    text = PROSE + "```python\n" + inspect.getsource(textwrap) + "```\n"
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    while len(ids) < min_len:
        ids = ids + ids
    return ids


class BodyMaker:
    def __init__(self, tokenizer, seed: int = 1234, model: str = "deepseek-v4") -> None:
        self.model = model
        self.ids = corpus_ids(tokenizer)
        self.pool = sorted(set(self.ids))
        self.rng = random.Random(seed)
        self.prompt = tokenizer.encode("You are a helpful assistant. Explain derender.", add_special_tokens=False).ids

    def _slice(self, n: int) -> list[int]:
        start = self.rng.randrange(0, len(self.ids) - n)
        return self.ids[start : start + n]

    def _logprobs(self, ids: list[int], k: int) -> dict:
        content = []
        for tid in ids:
            lp = -self.rng.random() * 0.5
            tops = [{"token_id": tid, "logprob": lp, "rank": 1}]
            for rank, alt in enumerate(self.rng.sample(self.pool, k - 1), start=2):
                lp -= self.rng.random() * 1.5
                tops.append({"token_id": alt, "logprob": lp, "rank": rank})
            content.append({"token_id": tid, "logprob": tops[0]["logprob"], "rank": 1, "top_logprobs": tops})
        return {"content": content}

    def generate_response(self, n: int, k: int) -> dict:
        ids = self._slice(n)
        choice = {"index": 0, "token_ids": ids, "finish_reason": "length", "stop_reason": None}
        if k:
            choice["logprobs"] = self._logprobs(ids, k)
        request_id = f"bench-{self.rng.randrange(10**9)}"
        return {"request_id": request_id, "choices": [choice], "prompt_token_ids": self.prompt}

    def chat(self, n: int, k: int) -> bytes:
        request = {"messages": [{"role": "user", "content": "hi"}]}
        if k:
            request |= {"logprobs": True, "top_logprobs": k}
        body = {"model": self.model, "generate_response": self.generate_response(n, k),
                "prompt_tokens": len(self.prompt), "prompt_token_ids": self.prompt, "chat_request": request}
        return json.dumps(body).encode()

    def completion(self, n: int, k: int) -> bytes:
        request = {"prompt": "hi"} | ({"logprobs": k - 1} if k else {})
        body = {"model": self.model, "generate_responses": [self.generate_response(n, k)],
                "prompt_tokens": [len(self.prompt)], "completion_request": request}
        return json.dumps(body).encode()
