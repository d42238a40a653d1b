"""Response-template outputs (``hf`` and ``beam``, reasoning and tools): the
test tokenizer carries a Qwen3-style ``response_template`` (thinking in
``<think>``, content closed by ``<|im_end|>``, JSON calls in ``<tool_call>``
shaped by a transform), read from the decoded prompt's last
``<|im_start|>assistant\\n`` on.  vLLM refuses these names beside any other
parser, so there is no legacy composition."""

from __future__ import annotations

import json
import random
from typing import Any

import cases_gigachat3 as gigachat3
import cases_qwen3 as qwen3
from family_cases import Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    ("hf", "hf"), ("hf", None), (None, "hf"), ("beam", "beam"), ("beam", None), (None, "beam"),
]  # fmt: skip

CALL_TRANSFORM = {"type": "function", "function": {"name": "{content.name}", "arguments": "{content.arguments}"}}
TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "thinking": {"open": "<think>", "close": "</think>", "content": "text"},
        "content": {"close": ["<|im_end|>", "<|endoftext|>"], "content": "text"},
        "tool_calls": {"open": "<tool_call>", "close": "</tool_call>", "content": "json", "repeats": True,
                       "transform": CALL_TRANSFORM},
    },
}  # fmt: skip

TOKENS = {"special": ["<|im_start|>", "<|im_end|>", "<|endoftext|>"], "added": ["<tool_call>", "</tool_call>"],
          "config": {"response_template": TEMPLATE}}  # fmt: skip
TOOLS = qwen3.TOOLS
IM = "<|im_start|>"
PROMPTS = [
    *qwen3.PROMPTS,
    f"{IM}user\nweather?<|im_end|>\n{IM}assistant\n<tool_",  # a delimiter the prompt leaves half-written
    f"{IM}user\nweather?<|im_end|>\n{IM}assistant\n<think>\nplan</thi",
    f"{IM}user\nhi<|im_end|>\n{IM}assistant\n<think>\nx</think>\n\nold<|im_end|>\n{IM}user\nweather?<|im_end|>\n",
]
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": "5"}}\n</tool_call>'
BENCH = ("hf", "hf", CALL)


def body(rng: random.Random) -> str:
    if rng.random() < 0.2:
        value = rng.choice([{"name": "", "arguments": {}}, {"name": "a", "arguments": None},
                            [{"name": "a", "arguments": {}}], {"name": "get_weather", "arguments": {
                                rng.choice(qwen3.KEYS): rng.choice(qwen3.VALUES) for _ in range(rng.randint(1, 3))}}])
        return json.dumps(value, ensure_ascii=rng.random() < 0.5)
    return rng.choice(["\x01", '{"name": "search", "arguments": {"query": "q\\u0000"}}', gigachat3.body(rng)])


def call(rng: random.Random) -> list[Piece]:
    head: Piece = rng.choice(["<tool_call>", "<tool_call>\n", ["spell", "<tool_call>"]])
    tail: Piece = rng.choice(["</tool_call>", "\n</tool_call>", "", "</tool_", ["spell", "</tool_call>"]])
    return [head, body(rng), tail]


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = qwen3.reasoning(rng)
    pieces.append(rng.choice(["", "\n\n", "Sure. ", "  \n", "中文 ", words(rng, qwen3.WORDS)]))
    for _ in range(rng.randint(0, 3) if rng.random() < 0.7 else 0):
        pieces.extend(call(rng))
        pieces.append(rng.choice(["", "\n", " ", "\n\n", "between "]))
    if rng.random() < 0.3:
        pieces.append(rng.choice(["<tool_call>", "</tool_call>", "</think>", "<think>", "<|im_end|>", "<|endoftext|>",
                                  "<|im_end|>\n<|im_start|>assistant\n", "<|im_start|>", "</thi", "<|im_",
                                  ["spell", "<|im_end|>"]]))  # fmt: skip
    pieces.append(rng.choice(["", " tail", "\n", "<|im_end|>", words(rng, qwen3.WORDS)]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


HANDWRITTEN: list[list[Piece]] = [
    # vLLM's tests/parser/test_response_template.py, in this template's spelling
    ["Hello<|im_end|>"],
    ["<think>plan</think>", "The answer is 42.<|im_end|>"],
    ["<think>plan</think>", CALL],
    ["Let me check.", CALL],
    [CALL, '<tool_call>{"name": "search", "arguments": {"query": "x", "k": 3}}</tool_call>'],
    ['<tool_call>{"name": "set_config", "arguments": {"enabled": "false", "count": "5.0", "value": "null",'
     ' "port": null}}</tool_call>'],
    ['<tool_call>{"name": "get_weather", "arguments": {"opts": "{\\"n\\": 4}", "tags": "[\\"a\\"]",'
     ' "ratio": "5", "detail": "1", "days": "3.5"}}</tool_call>'],
    ['<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"'],  # cut off: parsed as generated
    ['<tool_call>{"name": "get_weather"}</tool_call>after'],  # incomplete call: dropped
    ["plain answer"], ["</think>stray"], ["a<think>b</think>c<think>d"], ["<|im_end|>"],
    ["x<|im_end|>y<|endoftext|>z"], ["<tool_call>not json</tool_call> tail"], ["</tool_call>"],
    ["<tool_call>", '{"name": "noargs", "arguments": {}}', "</tool_"],
    ['<tool_call>{"name": "get_weather", "arguments": {"city": "a\\tb"}}</tool_call>  \n'],
    ["  \n", CALL, "\n"],
]
