"""MiniCPM-V outputs (``minicpmv`` reasoning, ``families/minicpmv.py`` and
``newlines.py``): Qwen3's shapes (cases_qwen3.py) with ``<|im_end|>`` and the
reserved markers in them, and newlines written as ``\\n`` escapes, in and out
of code and LaTeX spans; thinking on and off."""

from __future__ import annotations

import random

import cases_qwen3 as qwen3
from family_cases import Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    ("minicpmv", "qwen3_coder"),
    ("minicpmv", None),
    ("minicpmv", "hermes"),
]

TOKENS = {"special": ["<|im_start|>", "<|im_end|>", "<|reserved_12|>", "<|reserved_13|>", "<|reserved_14|>",
                      "<|reserved_15|>"],
          "added": ["<tool_call>", "</tool_call>"]}  # fmt: skip
TOOLS = qwen3.TOOLS
PROMPTS = qwen3.PROMPTS
BENCH = ("minicpmv", "qwen3_coder", qwen3.BENCH[2])
ESCAPED = ["\\n", "\\r\\n", "\\r", "\\\\n", "\\", "`a\\nb`", "```\\n```", "$x\\n$", "$$\\n$$", "\\(a\\n\\)",
           "\\[\\n\\]", "line\\nline", "\\t", "``", "$", "\\\\\\n", "<reserved_12>", "<|reserved_13|>", "<|im_end|>",
           "<reserved_15>", "`", "\\(", "\\["]  # fmt: skip


def output(rng: random.Random) -> list[Piece]:
    pieces = qwen3.output(rng)
    for _ in range(rng.randint(0, 4)):
        at = rng.randint(0, len(pieces))
        pieces.insert(at, words(rng, ESCAPED, 1, 3))
    if rng.random() < 0.1:
        pieces.insert(0, rng.choice(["<think>", "<think>\\n", "x<think>y</think>"]))
    return truncate(rng, pieces) if rng.random() < 0.1 else pieces


HANDWRITTEN: list[list[Piece]] = [
    *qwen3.HANDWRITTEN,
    ["reason\\nmore</think>\\n\\nHello\\nworld<|im_end|>"], ["Answer: `x\\ny` and $a\\nb$ then\\nend"],
    ["```python\\nprint(1)\\n```\\nDone"], ["<think>r</think>c\\r\\nd"], ["c<reserved_12>d<|reserved_14|>e"],
    ["\\\\n stays, \\n goes"], ["\\(x\\n\\) \\[y\\n\\] z\\n"], ["ends with \\"], ["ends with $"],
    ["x<think>hidden</think>shown\\n"],
    ["r</think>\n\n<tool_call>\n<function=search>\n<parameter=query>\na\\nb\n</parameter>\n</function>\n</tool_call>"],
]
