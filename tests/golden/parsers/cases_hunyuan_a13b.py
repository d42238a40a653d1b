"""Hunyuan A13B outputs: ``<think>\\n...\\n</think>\\n<answer>\\n...\\n</answer>``
(its markers are ordinary text) with ``<tool_calls>[{"name", "arguments"}]</tool_calls>``
calls, their near misses (a marker without its newlines, no ``</answer>``,
a call block inside ``<think>``), and malformed JSON (both parsers are not
engines)."""

from __future__ import annotations

import json
import random

import cases_qwen3 as q
from family_cases import CONTENT, REASONING, Piece, truncate, words

__all__ = ["BENCH", "HANDWRITTEN", "PAIRS", "PROMPTS", "TOKENS", "TOOLS", "output"]

TOOLS = q.TOOLS

PAIRS: list[tuple[str | None, str | None]] = [
    ("hunyuan_a13b", "hunyuan_a13b"),
    ("hunyuan_a13b", None),
    (None, "hunyuan_a13b"),
    ("deepseek_r1", "hunyuan_a13b"),
]

# A13B's think/answer/tool markers are ordinary text (several tokens each).
TOKENS = {"special": ["<|startoftext|>", "<|extra_0|>", "<|eos|>"], "added": []}

BENCH = ("hunyuan_a13b", "hunyuan_a13b",
         '<tool_calls>[{"name": "search", "arguments": {"query": "derender streaming", "k": 5}}]</tool_calls>')

# bench/stream.py: its own reasoning and answer markers
BENCH_OUTPUT = ("<think>\n", REASONING, "\n</think>\n<answer>\n", "\n\n", CONTENT, BENCH[2])

HEAD = "<|startoftext|>weather?<|extra_0|>"
PROMPTS = [HEAD, HEAD + "<think>\n", HEAD + "<think>\n\n</think>\n<answer>\n", ""]

THINK_END = "\n</think>\n<answer>\n"
ASSISTANT = "\u52a9\u624b\uff1a"  # A13B's template text (full-width colon), which its tool parser drops


def args(rng: random.Random) -> object:
    value = q.json_value(rng)
    if isinstance(value, dict) or rng.random() < 0.1:
        return value
    return rng.choice([{}, {"city": "Paris", "days": 5}, {"query": value}])


def call_block(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.7:
        calls = [{"name": rng.choice(q.NAMES[:5]), "arguments": args(rng)} for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.15:
            calls.append(rng.choice([{"name": "search"}, {"name": 5, "arguments": {}}, {"name": "a", "arguments": "{}"},
                                     {"name": "a", "arguments": [1]}, "x"]))  # fmt: skip
        body = json.dumps(calls, ensure_ascii=rng.random() < 0.5)
    else:
        body = rng.choice(['{"name": "search", "arguments": {}}', "[]", "[bad", "", '[{"name": "search"}]',
                           '[{"name": "search", "arguments": {"query": "a{b}"}}] x', "null"])  # fmt: skip
    tail = rng.choice(["</tool_calls>", "</tool_calls>", "</tool_calls>\n", ""])
    return "<tool_calls>" + rng.choice(["", "\n", " "]) + body + rng.choice(["", "\n"]) + tail


def content(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = [rng.choice(["", "Sure. ", "\n", words(rng, q.WORDS)])]
    for _ in range(rng.randint(0, 2)):
        pieces += [call_block(rng), rng.choice(["", "\n", " after "])]
    if rng.random() < 0.15:
        pieces.append(rng.choice(["<think>x</think>", "<think>", "</think>", ASSISTANT, "<tool_calls>"]))
    return pieces


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = []
    r = rng.random()
    if r < 0.6:
        pieces += [rng.choice(["<think>\n", "<think>\n", "<think>", "x<think>\n", ""]),
                   words(rng, [*q.WORDS, "plan"], 0, 4),
                   rng.choice([THINK_END, THINK_END, "\n</think>\n", "</think><answer>", "\n</think>\n<answer>"])]
    pieces += content(rng)
    pieces.append(rng.choice(["\n</answer>", "\n</answer>", "</answer>", "", "\n</answer>\nmore\n</answer>"]))
    if rng.random() < 0.15:
        pieces.append(rng.choice([" tail", THINK_END, "<|eos|>", call_block(rng)]))
    return truncate(rng, pieces) if rng.random() < 0.15 else pieces


_C = '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 5}}]</tool_calls>'
HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], ["<think>\nabc\n</think>\n<answer>\ndef\n</answer>"],
    ["<think>\nabc\n</think>\n<answer>\ndef"], ["abc\n</answer>"], ["<think>\nabc\n</think>\ndef\n</answer>"],
    ["pre<think>\nabc\n</think>\n<answer>\ndef"], ["<think>\n\n</think>\n<answer>\n\n</answer>"],
    ["<think>\nabc\n</think>\n<answer>\n", _C, "\n</answer>"], ["<think>\nabc\n</think>\n<answer>\nLet me check. ", _C],
    [_C], ["  ", _C], ["text ", _C, " ", _C], ["<tool_calls>[bad]</tool_calls>", _C],
    ["<think><tool_calls>[]</tool_calls></think>", _C], ["<think>", _C, "</think>"],
    ['<tool_calls>[{"name": "a", "arguments": "raw"}, {"name": "b"}]</tool_calls>'],
    ['<tool_calls>{"name": "a", "arguments": {}}</tool_calls>'], [ASSISTANT + "hi <tool_calls>[1]</tool_calls>"],
    ['<tool_calls>[{"name": "a", "arguments": {"x": {"y": {"z": 1}}}}]</tool_calls>'],
    # vLLM's tests/tool_parsers/test_hunyuan_a13b_tool_parser.py
    ["How can I help you today?"],
    ['<tool_calls>[{"name": "get_weather", "arguments": {"city": "San Francisco", "metric": "celsius"}}, '
     '{"name": "register_user", "arguments": {"name": "John Doe", "age": 37, "address": {"city": "San Francisco", '
     '"state": "CA"}, "role": null, "passed_test": true, "aliases": ["John", "Johnny"]}}]</tool_calls>'],
    ['I will call the tool now. <tool_calls>[{"name": "get_weather", "arguments": {"city": "Boston"}}]</tool_calls>'],
    ['<tool_calls>[{"name": "get_weather", "arguments": {"city": "Seattle"}}]</tool_calls>\nThank you!'],
    ['<tool_calls>[{"name": "get_weather", "arguments": {"city": "Boston"}}]</tool_calls>', "\n</answer>"],
    ['<tool_calls>[{"name": "get_weather", "arguments": {"city": "北京"}}]</tool_calls>'],
    ['<tool_calls>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 42}}]</tool_calls>'],
]
