"""Granite 3.0/3.1 JSON-array tool calls (``granite``): ``<|tool_call|>`` (a
special token) or ``<tool_call>`` (text), then ``[{...}, ...]``, and their
malformed shapes."""

from __future__ import annotations

import json
import random
from typing import Any

from family_cases import Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    (None, "granite"),
    ("deepseek_r1", "granite"),
]

TOKENS = {"special": ["<|tool_call|>", "<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>"], "added": []}

BENCH = (None, "granite", '<|tool_call|>[{"name": "search", "arguments": {"query": "derender streaming", "k": 5}}]')

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "ratio": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "k": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "noargs"}},
]  # fmt: skip

PROMPTS = ["<|start_of_role|>user<|end_of_role|>weather?<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>",
           ""]  # fmt: skip

WORDS = ["hello", " world", "世界", "😀", " ", "\n", "x", '"', "{", "}", ",", "[", "]", " answer: 42", "\\"]
NAMES = ["get_weather", "search", "noargs", "unknown", "", "get weather"]
KEYS = ["city", "days", "ratio", "tags", "query", "k", "name", "arguments", "x"]


def json_value(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if depth > 2 or r < 0.45:
        return rng.choice([1, -2.5, "s", "é😀", None, True, "5", 'a"b,c', "]}", "<tool_call>", "line\nbreak"])
    if r < 0.8:
        return {rng.choice(KEYS): json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    return [json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]


def element(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.85:
        name = rng.choice(NAMES)
        key = rng.choice(["arguments", "arguments", "parameters"])
        body: Any = {"name": name, key: {rng.choice(KEYS): json_value(rng) for _ in range(rng.randint(0, 3))}}
        if rng.random() < 0.15:
            body = {key: body[key], "name": name}
        return json.dumps(body, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, None, 1]))
    return rng.choice(["{bad", '{"name": "search"}', "{}", '{"name": "search", "arguments": "str"}', "1", '"s"',
                       '{"name": "search", "arguments": {"query": "q"}'])


def tool_output(rng: random.Random) -> str:
    marker = rng.choice(["<|tool_call|>", "<tool_call>", "<|tool_call|> ", "<tool_call>\n"])
    sep = rng.choice([", ", ",", ",\n", " , ", " "])
    elements = sep.join(element(rng) for _ in range(rng.choice([1, 1, 2, 3])))
    return marker + rng.choice(["[", "[", "[ ", ""]) + elements + rng.choice(["]", "]", "]", "", " ]"])


def forced_json(rng: random.Random) -> str:
    """What a forced tool_choice makes Granite write: a list of definitions or bare arguments."""
    if rng.random() < 0.5:
        calls = [{"name": rng.choice(NAMES), rng.choice(["parameters", "parameters", "arguments"]): {
            rng.choice(KEYS): json_value(rng)}} for _ in range(rng.randint(0, 2))]  # fmt: skip
        return json.dumps(calls)
    return json.dumps({rng.choice(KEYS): json_value(rng)})


def output(rng: random.Random) -> list[Piece]:
    if rng.random() < 0.12:
        return [rng.choice(["", " ", "\n"]) + forced_json(rng)]
    pieces: list[Piece] = []
    if rng.random() < 0.1:
        pieces += ["<think>", words(rng, WORDS, 0, 3), "</think>"]
    pieces.append(rng.choice(["", "", "Sure. ", "\n\n", words(rng, WORDS)]))
    if rng.random() < 0.75:
        pieces.append(tool_output(rng))
    if rng.random() < 0.3:
        pieces.append(rng.choice([" tail", "\n", "<|end_of_text|>", "]", ["spell", "<|tool_call|>"], "<tool_call>[",
                                  tool_output(rng)]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


C1 = '{"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}}'
C2 = '{"name": "search", "arguments": {"query": "q", "k": 5}}'
HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], [f"<|tool_call|>[{C1}]"], [f"<tool_call>[{C1}, {C2}]"], [f"Sure. <|tool_call|>[{C1}] done"],
    [f"\n\n<tool_call> [{C1}]\n"], [f"<|tool_call|>{C1}"], [f"<|tool_call|>[{C1} {C2}]"], [f"<|tool_call|>[{C1}"],
    ["<|tool_call|>[]"], ["<|tool_call|>"], ["<|tool_call|>[1, 2]"], ['<|tool_call|>[{"name": "search"}]'],
    ['<|tool_call|>[{"name": "search", "parameters": {"query": "q"}}]'],
    ['<tool_call>[{"arguments": {}, "name": "noargs"}]'],
    [f"<|tool_call|>[{C1}]<|tool_call|>[{C2}]"], ['<|tool_call|>[{"name": "search", "arguments": {"query": "]}, {"}}]'],
    [f"<think>r</think><|tool_call|>[{C1}]"], [f"<|tool_call|>[{C1}]<|end_of_text|>"],
    # From 19 on: a forced tool_choice's shapes land on "required" (i % 12 == 4) and named (5).
    [C1], [C2], ["[]"], ["  "], ['[{"name": "search", "parameters": {"query": "q"}, "extra": 1}]'], [C1], [C2],
    ['[{"name": 5}]'], ['{"city": "Paris"}'],
    ['[{"name": "search", "parameters": {"query": "q"}}, {"name": "noargs"}]'], ['{"city": "Paris", "days": "3"}'],
    [""], ["[{bad"], ["   "],
]
