"""LongCat-Flash tool calls (``longcat``): vLLM's Hermes parser with
``<longcat_tool_call>`` tags (``LongcatFlashToolParser``).  Outputs are
Qwen3's Hermes-style ones (cases_qwen3.py) with the tags respelled, most of
the time; the rest keep ``<tool_call>``, plain text to this parser."""

from __future__ import annotations

import random

import cases_qwen3 as qwen3
from family_cases import Piece, words

PAIRS: list[tuple[str | None, str | None]] = [
    (None, "longcat"),
    ("qwen3", "longcat"),
    ("deepseek_r1", "longcat"),
]

TOKENS = {"special": qwen3.TOKENS["special"], "added": ["<tool_call>", "</tool_call>", "<longcat_tool_call>",
                                                        "</longcat_tool_call>"]}  # fmt: skip
TOOLS = qwen3.TOOLS
PROMPTS = qwen3.PROMPTS


def longcat(pieces: list[Piece]) -> list[Piece]:
    def one(text: str) -> str:
        return text.replace("<tool_call>", "<longcat_tool_call>").replace("</tool_call>", "</longcat_tool_call>")

    return [one(p) if isinstance(p, str) else [p[0], one(p[1])] for p in pieces]


CALL = '<longcat_tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</longcat_tool_call>'
BENCH = ("qwen3", "longcat", CALL)


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = qwen3.reasoning(rng)
    pieces.append(rng.choice(["", "\n\n", "Sure. ", "  \n", "中文 ", words(rng, qwen3.WORDS)]))
    for _ in range(rng.randint(0, 3)):
        pieces.append(qwen3.hermes_call(rng))
        pieces.append(rng.choice(["", "\n", " ", "\n\n"]))
    if rng.random() < 0.25:
        pieces.append(rng.choice(["<tool_call>", "</tool_call>", "</think>", "<|im_end|>", ["spell", "<tool_call>"]]))
    pieces.append(rng.choice(["", " tail", "\n", words(rng, qwen3.WORDS)]))
    return longcat(pieces) if rng.random() < 0.85 else pieces


HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], ["r</think>\n\nHello"],
    ["r</think>\n\nHello ", CALL, " after"],
    ["r</think>\n\n", CALL, "\n", CALL.replace("get_weather", "search")],
    ["r</think>", '<longcat_tool_call>{"name": "get_weather", "arguments": {"city": "Par'],
    ["r</think>", "<longcat_tool_call>{bad}</longcat_tool_call>"],
    ["r</think>  \n", CALL, "  "],
    ["r</think>", '<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>'],  # Hermes' tags: text
    ["r</think>", ["spell", "<longcat_tool_call>"], '{"name": "search", "arguments": {}}</longcat_tool_call>'],
    ["<think>r</think>", CALL, "<|im_end|>"],
]
