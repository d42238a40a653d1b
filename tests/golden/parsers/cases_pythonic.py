"""Python-list tool calls (``pythonic``, ``llama4_pythonic``): ``[f(a=1), g(b="x")]``,
Llama 4's ``<|python_start|>...<|python_end|>``, and what makes them content."""

from __future__ import annotations

import random
from typing import Any

from family_cases import Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    (None, "pythonic"),
    (None, "llama4_pythonic"),
    ("deepseek_r1", "pythonic"),
]

TOKENS = {"special": ["<|eot|>", "<|header_start|>", "<|header_end|>"], "added": ["<|python_start|>", "<|python_end|>"]}

BENCH = (None, "pythonic", '[search(query="derender streaming", k=5)]')

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "k": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "noargs"}},
]  # fmt: skip

PROMPTS = ["<|header_start|>user<|header_end|>\n\nweather?<|eot|><|header_start|>assistant<|header_end|>\n\n", ""]

WORDS = ["hello", " world", "世界", "😀", " ", "\n", "x", '"', "(", ")", "[", "]", "=", ",", " answer: 42"]
NAMES = ["get_weather", "search", "noargs", "api.search", "_private", "f2", "x"]
KEYS = ["city", "days", "query", "k", "_k", "x1"]
VALUES = ['"Paris"', "'杭州'", "5", "-3", "+2.5", "1e3", "None", "True", "null", "true", "false", '"a\\"b"',
          "[1, 'a']", "{'n': 1}", "(800, 600)", "{'a', 'b'}", "f'hi'", "f'{x}'", "x", "1+2", "b'x'", "...",
          '"""multi\nline"""', "-'a'", "{1: 2}"]  # fmt: skip


def call(rng: random.Random) -> str:
    args = [f"{rng.choice(KEYS)}={rng.choice(VALUES)}" for _ in range(rng.randint(0, 3))]
    if rng.random() < 0.1:
        args.insert(0, rng.choice(VALUES))  # a positional argument
    sep = rng.choice([", ", ",", ",\n", " , "])
    return f"{rng.choice(NAMES)}({sep.join(args)}{rng.choice(['', '', ','])})"


def output(rng: random.Random) -> list[Piece]:
    r = rng.random()
    pieces: list[Piece] = []
    if rng.random() < 0.1:
        pieces += ["<think>", words(rng, WORDS, 0, 3), "</think>"]
    if r < 0.7:
        body = "[" + rng.choice([", ", ","]).join(call(rng) for _ in range(rng.randint(1, 3))) + "]"
        if rng.random() < 0.25:
            body = "<|python_start|>" + body + rng.choice(["<|python_end|>", "", "<|python_end|>\n"])
        pieces.append(rng.choice(["", "", " ", "Sure. "]) + body)
    else:
        pieces.append(words(rng, WORDS))
    if rng.random() < 0.2:
        pieces.append(rng.choice([" tail", "\n", "<|eot|>", "]", "\n# done", ";"]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], ['[get_weather(city="Paris", days=3)]'], ['[search(query="q"), noargs()]'],
    ['[get_weather(city="Paris")] and text'], ['[get_weather("Paris")]'], ["[noargs()]"], ["[]"], ["[1, 2]"],
    ['<|python_start|>[search(query="q")]<|python_end|>'], ['[search(query="q")]<|python_end|>'],
    ["[search(query=null, k=true)]"], ["[api.tools.search(query='q')]"], ["[search(query=f'{x}')]"],
    ['[search(query="q"'], [' [search(query="q")]'], ['[search(**{"query": "q"})]'], ["[_f(a=1)]"],
    ["[search(k=-1, query=(1, 2))]"], ["[search(query={'a': [1, None]})]\n"], ["<|python_start|>"], ["<|py"],
]
