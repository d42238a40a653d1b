"""Granite 3.2 reasoning (``granite``: "Here is my thought process: ... Here is my
response: ..."), alone and with Granite's JSON-array tool calls (``cases_granite``)."""

from __future__ import annotations

import random

from cases_granite import PROMPTS, TOKENS, TOOLS, tool_output
from family_cases import CONTENT, REASONING, Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    ("granite", "granite"),
    ("granite", None),
    ("granite", "hermes"),
]

BENCH = ("granite", "granite", '<|tool_call|>[{"name": "search", "arguments": {"query": "derender streaming"}}]')
# bench/stream.py: its own markers
BENCH_OUTPUT = ("Here is my thought process:", REASONING, "Here is my response:", "\n\n", CONTENT, BENCH[2])

THINK = ["Here is my thought process:", "Here's my thought process:", "Here is my thought process:"]
RESPONSE = ["Here is my response:", "Here's my response:", "Here is my response:"]
WORDS = ["hello", " world", "世界", "😀", " ", "\n", "x", "Here", " is", " my", ":", "Here is my", " response",
         "thought process"]  # fmt: skip


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = []
    if rng.random() < 0.2:
        pieces.append(words(rng, WORDS, 1, 3))  # text before the first marker
    if rng.random() < 0.8:
        pieces += [rng.choice(THINK), words(rng, WORDS, 0, 5)]
    if rng.random() < 0.7:
        pieces += [rng.choice(RESPONSE), rng.choice(["", " ", "\n", words(rng, WORDS)])]
    if rng.random() < 0.4:
        pieces.append(tool_output(rng))
    if rng.random() < 0.2:
        pieces.append(rng.choice(THINK + RESPONSE + [" tail"]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], ["Here is my thought process: plan Here is my response: answer"],
    ["Here's my thought process:plan\nHere's my response:"], ["Here is my thought process: unfinished"],
    ["Here is my response: without thinking"], ["pre Here is my thought process: a Here is my response: b"],
    ["Here is my thought process:a Here is my response: b Here is my response: c"],
    ["Here is my thought process:Here is my response:"],
    ["Here is my thought pro", "cess: x Here is my resp", "onse: y"],
    ['Here is my thought process: p Here is my response: <|tool_call|>[{"name": "search", "arguments": {}}]'],
    ["Here is my thought process: a Here is my thought process: b Here is my response: c"],
]

__all__ = ["BENCH", "HANDWRITTEN", "PAIRS", "PROMPTS", "TOKENS", "TOOLS", "output"]
