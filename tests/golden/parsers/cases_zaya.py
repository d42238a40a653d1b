"""ZAYA1 outputs: Qwen3's (cases_qwen3.py) with ``<zyphra_tool_call>``
wrappers, most of the time; the rest keep Qwen3's ``<tool_call>``, which is
plain text to the ``zaya`` parsers."""

from __future__ import annotations

import random

import cases_qwen3 as qwen3
from family_cases import Piece

PAIRS: list[tuple[str | None, str | None]] = [
    ("zaya", "zaya"),
    ("zaya", "zaya_xml"),
    ("zaya", None),
    (None, "zaya"),
    ("deepseek_r1", "zaya"),
]

TOKENS = {"special": qwen3.TOKENS["special"], "added": ["<zyphra_tool_call>", "</zyphra_tool_call>"]}
TOOLS = qwen3.TOOLS
PROMPTS = qwen3.PROMPTS


def zyphra(pieces: list[Piece]) -> list[Piece]:
    def one(text: str) -> str:
        return text.replace("<tool_call>", "<zyphra_tool_call>").replace("</tool_call>", "</zyphra_tool_call>")

    return [one(p) if isinstance(p, str) else [p[0], one(p[1])] for p in pieces]


BENCH = ("zaya", "zaya", zyphra([qwen3.BENCH[2]])[0])


def output(rng: random.Random) -> list[Piece]:
    pieces = qwen3.output(rng)
    return zyphra(pieces) if rng.random() < 0.85 else pieces


HANDWRITTEN: list[list[Piece]] = [
    *(zyphra(h) for h in qwen3.HANDWRITTEN),
    ["r</think>\n\nHello ", qwen3._call("get_weather", qwen3.P_CITY)],  # Qwen3's wrapper: text
    ["r</think>", "<zyphra_tool_call>\n<function=get_weather>\n", qwen3.P_CITY, "</function>\n</tool_call>"],
]
