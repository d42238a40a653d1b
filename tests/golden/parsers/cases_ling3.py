"""Ling 3 outputs: GLM-4.7's format (``<think>`` reasoning, thinking on by
default; ``<tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>``
calls), so GLM's generator and handwritten shapes, plus vLLM's
``tests/parser/engine/test_ling3.py`` cases."""

from __future__ import annotations

# Ling3's thinking switch is GLM's (`thinking` or `enable_thinking`, on when both are absent): GLM's REQUESTS.
from cases_glm import HANDWRITTEN as GLM_HANDWRITTEN
from cases_glm import PROMPTS, REQUESTS, TOKENS, TOOLS, output
from family_cases import Piece

__all__ = ["BENCH", "HANDWRITTEN", "PAIRS", "PROMPTS", "REQUESTS", "TOKENS", "TOOLS", "output"]

PAIRS: list[tuple[str | None, str | None]] = [
    ("ling3", "ling3"),
    ("ling3", None),
    (None, "ling3"),
    ("deepseek_r1", "ling3"),
]

BENCH = ("ling3", "ling3", "<tool_call>search<arg_key>query</arg_key><arg_value>derender streaming</arg_value>"
         "<arg_key>k</arg_key><arg_value>5</arg_value></tool_call>")

HANDWRITTEN: list[list[Piece]] = [
    # vLLM's tests/parser/engine/test_ling3.py
    ["<think>reason</think>answer"],
    ["only reasoning"],
    ["<think>only reasoning"],
    ["<tool_call>get_weather<arg_key>city</arg_key><arg_value>Beijing</arg_value></tool_call>"],
    ["<tool_call>ping</tool_call>"],
    ["</think><tool_call>noargs</tool_call>"],
    *GLM_HANDWRITTEN,
]
