"""Nemotron V3 outputs: Qwen3's (cases_qwen3.py) under the ``nemotron_v3``
reasoning parser, more of them without content (where vLLM swaps a blank
content and the reasoning), and the request flags that ask for the swap."""

from __future__ import annotations

import random

import cases_qwen3 as qwen3
from family_cases import Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    ("nemotron_v3", "qwen3_coder"),
    ("nemotron_v3", "hermes"),
    ("nemotron_v3", None),
]

TOKENS = qwen3.TOKENS
BENCH = ("nemotron_v3", "qwen3_coder", qwen3.BENCH[2])
TOOLS = qwen3.TOOLS
PROMPTS = qwen3.PROMPTS
REQUESTS = [
    {"tools": TOOLS, "chat_template_kwargs": {"force_nonempty_content": True}},
    {"chat_template_kwargs": {"force_nonempty_content": True}},
    {"chat_template_kwargs": {"enable_thinking": False}},
    {"tools": TOOLS, "chat_template_kwargs": {"enable_thinking": True, "force_nonempty_content": True}},
    {"tools": TOOLS, "chat_template_kwargs": {"force_nonempty_content": False}},
    {"tools": TOOLS, "reasoning_effort": "none", "chat_template_kwargs": {"force_nonempty_content": True}},
]

BLANKS = ["", "\n\n", "  \n", " ", "\t"]


def no_content(rng: random.Random) -> list[Piece]:
    """Reasoning and a blank (or no) content: the swap's shape."""
    body = words(rng, [*qwen3.WORDS, "plan", " step"], 0, 5) + rng.choice(["", "  ", "\n"])
    end = rng.choice(["</think>", "</think>\n\n", "\n</think>\n\n", "", ["spell", "</think>"]])
    head = rng.choice(["", "", "<think>"])
    tail: list[Piece] = [rng.choice(BLANKS)]
    if rng.random() < 0.3:
        tail.append(qwen3.xml_call(rng))
    return [head, body, end, *tail]


def output(rng: random.Random) -> list[Piece]:
    if rng.random() < 0.4:
        pieces = no_content(rng)
        return truncate(rng, pieces) if rng.random() < 0.1 else pieces
    return qwen3.output(rng)


HANDWRITTEN: list[list[Piece]] = [
    *qwen3.HANDWRITTEN,
    # vLLM's tests/parser/engine/test_nemotron_v3.py shapes: reasoning without content is swapped
    ["I am thinking about this"], ["<think>I am thinking</think>"], ["I am thinking</think>\n\n"],
    ["I am thinking   \n</think>\n\nThe answer"], ["  \n"], ["\n</think>\n\n"],
    ["r</think>\n\n", qwen3._call("get_weather", qwen3.P_CITY)],
    ["plan <function=search>\n<parameter=query>\nq\n</parameter>\n</function></think>  "],
]
