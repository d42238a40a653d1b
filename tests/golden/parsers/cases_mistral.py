"""Mistral outputs (v13+ tokenizer: ``[THINK]`` and ``[ARGS]`` in the vocabulary):
``[THINK]`` reasoning, ``[TOOL_CALLS]name[ARGS]{...}`` and ``[TOOL_CALLS]name{...}``
calls, and their malformed shapes.  ``cases_mistral_v11`` reuses these outputs
with a tokenizer without ``[THINK]``."""

from __future__ import annotations

import json
import random
from typing import Any

from family_cases import Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    ("mistral", "mistral"),
    ("mistral", None),
    (None, "mistral"),
    ("deepseek_r1", "mistral"),
]

# The real tokenizers' control tokens are special; DeepSeek V4's <think> pair stays (deepseek_r1).
TOKENS = {"special": ["[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]", "[INST]", "[/INST]", "[CALL_ID]"],
          "added": []}  # fmt: skip

BENCH = ("mistral", "mistral", '[TOOL_CALLS]search[ARGS]{"query": "derender streaming", "k": 5}')

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "unit": {"type": "string", "enum": ["c", "f"]},
        "detail": {"type": ["boolean", "null"]}, "ratio": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "opts": {"type": "object", "properties": {"n": {"type": "integer"}}}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "k": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "noargs"}},
]  # fmt: skip

PROMPTS = ["[INST]weather?[/INST]", "[INST]weather?[/INST][THINK]", ""]

WORDS = ["hello", " world", "世界", "😀", " ", "\n", "\t", "x", '"', "[", "]", "{", "}", " answer: 42", "éß",
         "\u00a0", "\\", " = ", "/", "THINK", "TOOL_CALLS"]  # fmt: skip
NAMES = ["get_weather", "search", "noargs", "unknown_tool", "", " search", "get weather", "search\n"]
KEYS = ["city", "days", "unit", "detail", "ratio", "tags", "opts", "query", "k", "name", "x"]


def json_value(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if depth > 2 or r < 0.45:
        return rng.choice([1, -2.5, "s", "é😀", None, True, 1e20, 'a"b', "line\nbreak", "[TOOL_CALLS]", "5", "{x}"])
    if r < 0.8:
        return {rng.choice(KEYS): json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    return [json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]


def args_text(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.75:
        value = {rng.choice(KEYS): json_value(rng) for _ in range(rng.randint(0, 3))}
        return json.dumps(value, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, None, 1]))
    return rng.choice(["{bad", "{", '{"city": "Paris"', "", " ", "[1, 2]", '"s"', "42", "{} {}",
                       '{"city": "Paris"} and more', "{}\n", '{"a": NaN}', "not json"])


def call(rng: random.Random) -> str:
    name = rng.choice(NAMES)
    sep = rng.choice(["[ARGS]", "[ARGS]", "", " ", "[ARGS][ARGS]"])
    body = args_text(rng)
    if not sep and not body.startswith("{"):
        body = "{" + body  # name{args}: the brace ends the name
    return "[TOOL_CALLS]" + name + sep + body


def reasoning(rng: random.Random) -> list[Piece]:
    r = rng.random()
    body = words(rng, [*WORDS, "plan", " step"], 0, 5)
    end: Piece = rng.choice(["[/THINK]", "[/THINK]\n\n", "\n[/THINK]", ""])
    if r < 0.55:
        return ["[THINK]", body, end]
    if r < 0.65:
        return [body, "[/THINK]"]  # a stray end
    return []


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = reasoning(rng)
    pieces.append(rng.choice(["", "\n\n", "Sure. ", "  \n", "中文 ", words(rng, WORDS)]))
    for _ in range(rng.randint(0, 3)):
        pieces.append(call(rng))
        if rng.random() < 0.3:
            pieces.append(rng.choice(["", "\n", " ", " trailing text"]))
    if rng.random() < 0.25:
        pieces.append(rng.choice(["[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]", "[INST]", "}", "{",
                                  ["spell", "[TOOL_CALLS]"]]))
    pieces.append(rng.choice(["", " tail", "\n", words(rng, WORDS)]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


W = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 3}'
HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], ["[THINK]r[/THINK]Hello"], ["[THINK]r\n\n[/THINK]\n\nHello  "],
    ["Hello ", W], [W], ["\n\n", W, " after"],
    [W, '[TOOL_CALLS]search[ARGS]{"query": "q", "k": "5"}'],
    ['[TOOL_CALLS]search{"query": "q"}'],  # pre-[ARGS] v11 shape: the brace ends the name
    ['[TOOL_CALLS]search[ARGS]{"query": "q"} trailing text after the JSON'],
    ["[TOOL_CALLS]search[ARGS]{bad json"], ["[TOOL_CALLS]search[ARGS]"], ["[TOOL_CALLS]search"],
    ["[TOOL_CALLS][ARGS]{\"query\": \"q\"}"], ['[TOOL_CALLS]  [ARGS]{"name": "search", "arguments": {}}'],
    ["[TOOL_CALLS]"], ["text [TOOL_CALLS]"], ["[THINK]r", W],  # a call ends reasoning
    ["[THINK]unclosed reasoning"], ["r[/THINK]stray end"], ["a[THINK]b[/THINK]c[THINK]d"],
    ["[THINK]r[/THINK]", ["spell", "[TOOL_CALLS]"], 'search[ARGS]{"query": "q"}'],
    ["[TOOL_CALLS]noargs[ARGS]{}"], ['[TOOL_CALLS]get_weather[ARGS]{"days": "5", "ratio": "1.5", "tags": ["a"]}'],
    ['[TOOL_CALLS]search[ARGS]"just a string"'], ["[TOOL_CALLS]search[ARGS][1, 2]"],
    ['[TOOL_CALLS]search[ARGS]{"query": "[TOOL_CALLS]inside"}'],
    ['[TOOL_CALLS]search[ARGS]{"query": "q"}[INST]'], ["[INST]x[/INST]y"],
    ["<think>r</think>", W], ["[THINK]r[/THINK]  \n", W, "  "],
    ['[TOOL_CALLS]search[ARGS]{"query": "q"}[TOOL_CALLS][TOOL_CALLS]noargs[ARGS]{}'],
]
