"""GigaChat 3 outputs (``gigachat3`` tools): content, then at most one call
after ``<|message_sep|>function call<|role_sep|>\\n`` or ``<|function_call|>``,
its JSON well-formed or not, a trailing ``</s>``, truncations."""

from __future__ import annotations

import json
import random
from typing import Any

import cases_qwen3 as qwen3
from family_cases import Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    (None, "gigachat3"),
    ("qwen3", "gigachat3"),
    ("deepseek_r1", "gigachat3"),
]

TOKENS = {"special": ["<|message_sep|>", "<|role_sep|>", "<|function_call|>", "<|im_start|>", "<|im_end|>"],
          "added": []}  # fmt: skip
TOOLS = qwen3.TOOLS
PROMPTS = ["<|im_start|>user\nweather?<|im_end|>\n<|im_start|>assistant\n", ""]
CALL = '<|message_sep|>function call<|role_sep|>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'
BENCH = (None, "gigachat3", CALL)

MARKERS: list[Piece] = ["<|message_sep|>function call<|role_sep|>\n", "function call<|role_sep|>\n",
                        "<|function_call|>", "<|message_sep|><|function_call|>", "function call<|role_sep|>",
                        ["spell", "<|function_call|>"], "<|message_sep|>"]  # fmt: skip


def body(rng: random.Random) -> str:
    r = rng.random()
    args: Any = qwen3.json_value(rng)
    if r < 0.6:
        value: Any = {"name": rng.choice(qwen3.NAMES[:5]), "arguments": args if isinstance(args, dict) else {}}
    elif r < 0.75:
        value = {"name": "search", "arguments": args}
    elif r < 0.85:
        value = rng.choice([{"name": "a"}, {"arguments": {}}, [1], "s", {"name": "a", "arguments": "{}"}])
    else:
        return rng.choice(["{bad", "", " ", '{"name": "a", "arguments": {}} x',
                           '{"name": "a", "arguments": {"k": "v\n"}}'])
    return json.dumps(value, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, None, 2]))


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = qwen3.reasoning(rng) if rng.random() < 0.3 else []
    pieces.append(rng.choice(["", "  \n", "Sure. ", "中文 ", words(rng, qwen3.WORDS)]))
    if rng.random() < 0.75:
        pieces.append(rng.choice(MARKERS))
        pieces.append(body(rng))
    pieces.append(rng.choice(["", "", "</s>", "</s>\n", "\n", " tail", "<|message_sep|>more", "</s> x"]))
    return truncate(rng, pieces) if rng.random() < 0.15 else pieces


HANDWRITTEN: list[list[Piece]] = [
    ["plain answer"], [CALL], ["Let me check.", CALL], ["Let me check.", CALL, "</s>"], ["  \n", CALL],
    ['function call<|role_sep|>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'],
    ['<|function_call|>{"name": "get_weather", "arguments": {}}'],
    ['a<|message_sep|>b<|function_call|>{"name": "get_weather", "arguments": {}}'],
    ['x<|function_call|>{"name": "get_weather", "arguments": {"city": "Par'],
    ['x<|function_call|>{"name": "get_weather", "arguments": "{}"}'],
    ['x<|function_call|>{"name": "get_weather"}'],
    ['x<|message_sep|>y'], ["</s>"], ["r</think>\n\nHi", CALL],
    ['x<|function_call|>{"name": "get_weather", "arguments": {"city": "a\tb"}}'],  # strict=False: raw tab
    ['x<|function_call|>{"name": "a", "arguments": {}}</s>  \n'],
]
