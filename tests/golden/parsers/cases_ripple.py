"""Ripple outputs: optional ``<think>`` reasoning and Hermes-style JSON calls,
markers with and without their framing newlines, malformed and truncated."""

from __future__ import annotations

import json
import random

import cases_qwen3 as qwen3
from family_cases import Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    ("ripple", "ripple"),
    ("ripple", None),
    (None, "ripple"),
    ("deepseek_r1", "ripple"),
]

# The markers are plain text in Ripple's tokenizer (<think> is an added token of the base one).
TOKENS = {"special": ["<|im_start|>", "<|im_end|>", "<|endoftext|>"], "added": []}
TOOLS = qwen3.TOOLS
PROMPTS = ["<|im_start|>user\nweather?<|im_end|>\n<|im_start|>assistant\n", ""]
CALL = '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
BENCH = ("ripple", "ripple", CALL)


def nl(rng: random.Random) -> str:
    return rng.choice(["\n", "\n", "", "\n\n", " "])


def call(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.7:
        args = qwen3.json_value(rng)
        key = rng.choice(["arguments", "arguments", "parameters", "args"])
        value = {"name": rng.choice(qwen3.NAMES[:5]), key: args}
        if rng.random() < 0.2:
            value = {key: args, "name": value["name"]}  # arguments before the name
        body = json.dumps(value, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, None, 1]))
    else:
        body = rng.choice(["{bad", "", '{"name": "search"}', '{"name": "search", "arguments": "q"}', "[1]",
                           '{"name": "search", "arguments": {"query": "}"}', '{"name": "search", "arguments": {'])
    close = rng.choice(["</tool_call>", "</tool_call>", ""])
    return nl(rng) + "<tool_call>" + nl(rng) + body + nl(rng) + close


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = []
    if rng.random() < 0.5:
        pieces += ["<think>" + nl(rng), words(rng, [*qwen3.WORDS, "plan"], 0, 5),
                   rng.choice([nl(rng) + "</think>" + nl(rng), "", ["spell", "</think>"]])]
    pieces.append(rng.choice(["", "Sure.", "  ", "中文", words(rng, qwen3.WORDS)]))
    for _ in range(rng.randint(0, 3)):
        pieces.append(call(rng))
    if rng.random() < 0.2:
        pieces.append(rng.choice(["<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_end|>", "\n"]))
    pieces.append(rng.choice(["", " tail", "\n", words(rng, qwen3.WORDS)]))
    return truncate(rng, pieces) if rng.random() < 0.15 else pieces


HANDWRITTEN: list[list[Piece]] = [
    ["plain answer"], ["<think>\nplan\n</think>\nAnswer"], ["Answer", CALL],
    ["<think>\nplan\n</think>\n", CALL.lstrip("\n")], ["<think>\nplan", CALL],
    ["Hi", CALL, CALL.replace("get_weather", "search")],
    ["x\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"a\"}}"],
    ["x<tool_call>{\"arguments\": {\"query\": \"a\"}, \"name\": \"search\"}</tool_call>"],
    ["x<tool_call>{\"name\": \"search\", \"arguments\": \"not an object\"}</tool_call>"],
    ["x<tool_call>{\"name\": \"search\", \"parameters\": {\"k\": 1}}</tool_call>"],
    ["</think>\nstray end"], ["<think>a<think>b</think>c"], ["\n\n<think>\nr\n</think>\n\n"],
]
