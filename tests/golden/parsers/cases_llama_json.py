"""Llama 3.1+/4 JSON tool calls (``llama3_json``, ``llama4_json``): ``<|python_tag|>``
or a bare ``{`` at the start, ``;``-separated call objects, end-of-output
tokens, and their malformed shapes (which the validator turns into content)."""

from __future__ import annotations

import json
import random
from typing import Any

from family_cases import Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    (None, "llama3_json"),
    (None, "llama4_json"),
    ("deepseek_r1", "llama3_json"),
]

# Llama 3.1's all_special_tokens hold BOS and <|eot_id|>; <|python_tag|> and <|eom_id|> are added tokens.
TOKENS = {"special": ["<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"],
          "added": ["<|python_tag|>", "<|eom_id|>", "<|end_of_text|>"]}  # fmt: skip

BENCH = (None, "llama3_json", '<|python_tag|>{"name": "search", "parameters": {"query": "derender streaming", "k": 5}}')

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "ratio": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "k": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "noargs"}},
]  # fmt: skip

H = "<|start_header_id|>"
PROMPTS = [f"{H}user<|end_header_id|>\n\nweather?<|eot_id|>{H}assistant<|end_header_id|>\n\n", ""]

WORDS = ["hello", " world", "世界", "😀", " ", "\n", "x", '"', "{", "}", ";", "[", "]", " answer: 42", "\\"]
NAMES = ["get_weather", "search", "noargs", "unknown", "", "get weather"]
KEYS = ["city", "days", "ratio", "tags", "query", "k", "name", "arguments", "x"]
END = ["", "", "<|eom_id|>", "<|eot_id|>", "<|eom_id|>\n", "<|end_of_text|>"]


def json_value(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if depth > 2 or r < 0.45:
        return rng.choice([1, -2.5, "s", "é😀", None, True, "5", 'a"b;c', "}{", "<|python_tag|>", "line\nbreak"])
    if r < 0.8:
        return {rng.choice(KEYS): json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    return [json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]


def call_object(rng: random.Random) -> str:
    r = rng.random()
    key = rng.choice(["parameters", "arguments", "parameters", "arguments", "args"])
    if r < 0.88:
        name = rng.choice(NAMES)
        body: Any = {"name": name, key: {rng.choice(KEYS): json_value(rng) for _ in range(rng.randint(0, 3))}}
        if rng.random() < 0.15:
            body = {key: body[key], "name": body["name"]}  # arguments first
        return json.dumps(body, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, None, 1]))
    if r < 0.94:
        return json.dumps({"name": rng.choice(NAMES), key: rng.choice(['{"a": 1}', 5, None, [1]])})
    return rng.choice(["{bad", '{"name": "search"}', "{}", '{"name": "search", "parameters": {"query": "q"}',
                       '{"name": "search", "parameters": {}} extra'])


def tool_output(rng: random.Random) -> str:
    objs = [call_object(rng) for _ in range(rng.choice([1, 1, 2, 3]))]
    sep = rng.choice(["; ", ";", ";\n", " ; ", "; ", "", ", "])
    head = rng.choice(["<|python_tag|>", "<|python_tag|>", "", "<|python_tag|> ", "<|python_tag|>\n"])
    return head + sep.join(objs) + rng.choice(END)


def output(rng: random.Random) -> list[Piece]:
    r = rng.random()
    pieces: list[Piece] = []
    if rng.random() < 0.15:
        pieces += ["<think>", words(rng, WORDS, 0, 3), "</think>"]
    if r < 0.55:
        pieces.append(tool_output(rng))
    elif r < 0.75:
        pieces += [words(rng, WORDS), rng.choice(["<|python_tag|>", " "]), tool_output(rng)]
    else:
        pieces.append(words(rng, WORDS))
    if rng.random() < 0.25:
        pieces.append(rng.choice([" tail", "\n", "<|eom_id|>", "<|eot_id|>", "; {", ["spell", "<|python_tag|>"], "}"]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


C1 = '{"name": "get_weather", "parameters": {"city": "Paris", "days": "3"}}'
C2 = '{"name": "search", "arguments": {"query": "q", "k": 5}}'
HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], ["<|python_tag|>" + C1], [C1], [C1 + "; " + C2], ["<|python_tag|>" + C1 + ";" + C2],
    [C1 + "<|eom_id|>"], ["<|python_tag|>" + C1 + "<|eom_id|>\n"], [C1 + " trailing"], [C1 + "; "],
    [C1 + "; ;" + C2], [C1 + C2], [" " + C1], ["Sure. <|python_tag|>" + C1], ["Sure. " + C1],
    ['{"name": "search"}'], ["{bad json"], ['{"name": "search", "parameters": {"query": "q"}'],
    ["<|python_tag|>"], ["<|python_tag|>  "], ["<|python_tag|>hello"], ["<|pyth"],
    ['{"parameters": {"name": "inner"}, "name": "search"}'], ['{"name": "search", "parameters": "str"}'],
    ['{"name": "noargs", "parameters": {}}'], ["<|python_tag|>" + C1 + "<|python_tag|>" + C2],
    ['[{"name": "search", "parameters": {}}]'], ["{}"], ["<think>r</think>" + C1],
    ["<|python_tag|>" + C1 + "<|eot_id|> more"], ['{"name": "search", "parameters": {"q": "a;b}{"}}'],
]
