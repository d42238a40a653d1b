"""ERNIE 4.5 outputs: reasoning closed by </think>, content wrapped in
<response>...</response> (or not), and <tool_call>{json}</tool_call> calls,
with their malformed shapes (both parsers are not engines)."""

from __future__ import annotations

import json
import random

import cases_qwen3 as q
from family_cases import CONTENT, REASONING, Piece, truncate, words

__all__ = ["BENCH", "HANDWRITTEN", "PAIRS", "PROMPTS", "TOKENS", "TOOLS", "output"]

TOOLS = q.TOOLS

PAIRS: list[tuple[str | None, str | None]] = [
    ("ernie45", "ernie45"),
    ("ernie45", None),
    (None, "ernie45"),
    ("deepseek_r1", "ernie45"),
]

TOKENS = {"special": ["<|begin_of_sentence|>", "<|end_of_sentence|>"],
          "added": ["<response>", "</response>", "<tool_call>", "</tool_call>"]}  # fmt: skip

BENCH = ("ernie45", "ernie45", '<tool_call>\n{"name": "search", "arguments": {"query": "derender streaming", "k": 5}}\n'
         "</tool_call>")
# bench/stream.py: an answer (a call comes without content: text before it and no <response> is held to the end)
BENCH_OUTPUT = (REASONING, "\n</think>\n\n<response>\n", CONTENT, "\n</response>\n")

HEAD = "<|begin_of_sentence|>User: weather?\nAssistant: "
PROMPTS = [HEAD, HEAD + "<think>\n", HEAD + "<think>\n\n</think>\n\n", ""]


def call(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.75:
        body = json.dumps({"name": rng.choice(q.NAMES[:5]), "arguments": q.json_value(rng)},
                          ensure_ascii=rng.random() < 0.5)  # fmt: skip
    else:
        body = rng.choice(["{bad}", "{}", '{"name": 1}', '{"arguments": {}}', "[1]", '{"name": "a"} x', "{"])
    tail = rng.choice(["\n</tool_call>", "</tool_call>", "", "\n"])
    return "<tool_call>" + rng.choice(["\n", "", " "]) + body + tail


def content(rng: random.Random) -> list[Piece]:
    body = words(rng, [*q.WORDS, "<response>", "</response>"], 0, 5)
    r = rng.random()
    if r < 0.5:
        return [rng.choice(["\n\n", "", "\n"]), "<response>", rng.choice(["\n", ""]), body,
                rng.choice(["\n</response>\n", "</response>", "", "</response> x </response>"])]
    return [rng.choice(["", "\n", "  "]), body]


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = []
    r = rng.random()
    if r < 0.8:
        pieces += [rng.choice(["", "<think>"]), words(rng, [*q.WORDS, "plan"], 0, 4),
                   rng.choice(["\n</think>\n\n", "</think>", ["spell", "</think>"], ""])]
    if rng.random() < 0.5:
        pieces += content(rng)
    else:
        pieces.append(rng.choice(["", "Sure.\n", "\n\n", "  "]))
        for _ in range(rng.randint(1, 3)):
            pieces += [call(rng), rng.choice(["", "\n", " "])]
    if rng.random() < 0.2:
        pieces.append(rng.choice(["<tool_call>", "</tool_call>", "<response>", "</response>", "</think>", "<think>",
                                  "<|end_of_sentence|>", " tail"]))
    return truncate(rng, pieces) if rng.random() < 0.15 else pieces


_C = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": "5"}}\n</tool_call>\n'
HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], ["abc\n</think>\n\n<response>\ndef\n</response>\n"], ["abc\n</think>\ndef"],
    ["abc\n</think>\n\n", _C], ["abc\n</think>\n\nLet me check.\n\n", _C, _C, "after"],
    ["abc</think>\n\n", '<tool_call>{"name": "search", "arguments": {"query": "q"}}</tool_call>', "<tool_call>{bad}"],
    ["abc</think>pre <response>a</response> mid </response> tail"],
    ["abc</think>pre <response>no end"], ["abc</think>x </response> y <response> z"],
    ["abc</think>  ", "<tool_call>garbage"], ["abc</think>\n", "<tool_call>\n", "{\"name\": \"search\"}"],
    ["<think>abc</think><response>", ["spell", "</response>"], "x</response>"],
    ["abc</think>\n\n", '<tool_call>{"name": 5, "arguments": {}}</tool_call>'],
    ["abc</think>Hi\n\n\n", '<tool_call>{"name": "noargs"}</tool_call>'],
]
