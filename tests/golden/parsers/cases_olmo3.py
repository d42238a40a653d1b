"""Olmo 3 outputs: <think> reasoning (opened by the output or the template)
and Qwen3/Hermes-shaped content (cases_qwen3.py); the olmo3 reasoning parser
(not an engine) with no tool parser and with two others."""

from __future__ import annotations

import random

import cases_qwen3 as q
from family_cases import CONTENT, REASONING, Piece

__all__ = ["BENCH", "HANDWRITTEN", "PAIRS", "PROMPTS", "TOKENS", "TOOLS", "output"]

TOOLS = q.TOOLS
TOKENS = q.TOKENS
PROMPTS = q.PROMPTS

PAIRS: list[tuple[str | None, str | None]] = [
    ("olmo3", None),
    ("olmo3", "hermes"),
    ("olmo3", "qwen3_coder"),
]

BENCH = ("olmo3", "hermes", '<tool_call>\n{"name": "search", "arguments": {"query": "derender streaming", "k": 5}}\n'
         "</tool_call>")
BENCH_OUTPUT = ("<think>", REASONING, "</think>", "\n\n", CONTENT, "\n\n", BENCH[2])  # bench/stream.py


def output(rng: random.Random) -> list[Piece]:
    pieces = q.output(rng)
    if rng.random() < 0.15:
        pieces.insert(0, rng.choice(["<think>", " <think>", "</think>", "x<think>"]))
    return pieces


HANDWRITTEN: list[list[Piece]] = [
    *q.HANDWRITTEN,
    ["<think><think>r</think>c"], [" <think>r</think>c"], ["<think>r"], ["<think></think>"], ["</think>"],
    ["a</think>b</think>c"],
]
