"""Granite 4.2 (``granite_thinking_parser``, ``granite_toolcall_parser``): Qwen3's
outputs (``cases_qwen3``), plus the requests Granite's reasoning parser reads
(``force_nonempty_content``) and content that starts with newlines."""

from __future__ import annotations

from typing import Any

from cases_qwen3 import BENCH as _QWEN3_BENCH
from cases_qwen3 import HANDWRITTEN as _QWEN3_HANDWRITTEN
from cases_qwen3 import PROMPTS, TOKENS, TOOLS, output
from family_cases import Piece

PAIRS: list[tuple[str | None, str | None]] = [
    ("granite_thinking_parser", "granite_toolcall_parser"),
    ("granite_thinking_parser", None),
    (None, "granite_toolcall_parser"),
    ("deepseek_r1", "granite_toolcall_parser"),
]

REQUESTS: list[dict[str, Any]] = [
    {"tools": TOOLS, "chat_template_kwargs": {"force_nonempty_content": True}},
    {"chat_template_kwargs": {"force_nonempty_content": True}},
    {"tools": TOOLS, "chat_template_kwargs": {"enable_thinking": False, "force_nonempty_content": True}},
]

BENCH = ("granite_thinking_parser", "granite_toolcall_parser", _QWEN3_BENCH[2])

CALL = "<tool_call>\n<function=search>\n<parameter=query>\nq\n</parameter>\n</function>\n</tool_call>"
HANDWRITTEN: list[list[Piece]] = [
    *_QWEN3_HANDWRITTEN,
    ["plan\n</think>\n"], ["plan\n</think>\n\n\nAnswer"], ["plan\n</think>\n \nAnswer"], ["plan"], ["plan  \n"],
    ["plan</think>\n\n", CALL], ["\n\nno thinking"], ["plan</think>"], ["<think>\n</think>\n"],
    ["plan\n</think>\nA\n</think>\nB"], ["\n"], [""], ["plan</think>\n", CALL, "\n"],
]

__all__ = ["BENCH", "HANDWRITTEN", "PAIRS", "PROMPTS", "REQUESTS", "TOKENS", "TOOLS", "output"]
