"""Phi-4-mini tool calls (``phi4_mini_json``): ``functools[{...}, ...]`` anywhere in
the output, and what makes them content."""

from __future__ import annotations

import json
import random
from typing import Any

from cases_granite import TOOLS
from family_cases import CONTENT, Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    (None, "phi4_mini_json"),
    ("deepseek_r1", "phi4_mini_json"),
]

TOKENS = {"special": ["<|end|>", "<|user|>", "<|assistant|>"], "added": ["<|tool_call|>", "<|/tool_call|>"]}

BENCH = (None, "phi4_mini_json", 'functools[{"name": "search", "arguments": {"query": "derender streaming"}}]')
BENCH_OUTPUT = (CONTENT, " ", BENCH[2])  # bench/stream.py (no reasoning parser)

PROMPTS = ["<|user|>weather?<|end|><|assistant|>", ""]

WORDS = ["hello", " world", "世界", "😀", " ", "\n", "x", '"', "{", "}", "[", "]", ",", " answer: 42", "functools"]
NAMES = ["get_weather", "search", "noargs", "unknown", ""]


def element(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.8:
        key = rng.choice(["arguments", "arguments", "parameters"])
        value: Any = rng.choice([{"city": "Paris"}, {"query": "q", "k": 5}, {}, {"tags": ["a"]}, "str", None])
        return json.dumps({"name": rng.choice(NAMES), key: value}, ensure_ascii=rng.random() < 0.5)
    return rng.choice(['{"name": "search"}', '{"name": 5, "arguments": {}}', "1", '"s"', "{bad", '{"arguments": {}}'])


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = [rng.choice(["", "", "Sure. ", "\n", words(rng, WORDS)])]
    if rng.random() < 0.7:
        body = rng.choice([", ", ","]).join(element(rng) for _ in range(rng.choice([1, 1, 2, 3])))
        pieces.append(rng.choice(["functools[", "functools[", "functools ["]) + body + rng.choice(["]", "]", ""]))
    if rng.random() < 0.3:
        pieces.append(rng.choice([" tail", "\n", "<|end|>", "]", "functools[]"]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


C1 = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], [f"functools[{C1}]"], [f"Sure. functools[{C1}] done"], [f"functools[{C1}, {C1}]"],
    ['functools[{"name": "search", "parameters": {"query": "q"}}]'],
    ['functools[{"name": "search", "arguments": ["a"]}]'],
    ["functools[bad]"], ['functools[{"name": "search"}]'], ["functools[]"], [f"functools[{C1}"],
    ['functools[{"name": 5, "arguments": {}}]'], ['functools["arguments"]'],
]

__all__ = ["BENCH", "HANDWRITTEN", "PAIRS", "PROMPTS", "TOKENS", "TOOLS", "output"]
