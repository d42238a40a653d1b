"""Holo2 outputs: ``holo2`` is vLLM's ``DeepSeekV3ReasoningWithThinkingParser``
(``deepseek_v3`` reasoning, thinking on unless ``thinking``/``enable_thinking``
say otherwise).  Holo2 is built on Qwen3-VL, so its outputs are Qwen3's
(<think> reasoning, Hermes or XML tool calls), with the thinking switches."""

from __future__ import annotations

from typing import Any

from cases_qwen3 import HANDWRITTEN, PROMPTS, TOKENS, TOOLS, output

PAIRS: list[tuple[str | None, str | None]] = [
    ("holo2", "hermes"),
    ("holo2", None),
    ("holo2", "qwen3_coder"),  # a legacy reasoning parser with an engine tool parser
    ("deepseek_v3", "hermes"),  # the same class, thinking off by default
]

BENCH = ("holo2", "hermes", '<tool_call>\n{"name": "search", "arguments": {"query": "derender streaming", "k": 5}}'
         "\n</tool_call>")

# The thinking switch in every spelling DeepSeekV3ReasoningWithThinkingParser reads.
REQUESTS: list[dict[str, Any]] = [
    {"tools": TOOLS, "chat_template_kwargs": {"thinking": False}},
    {"tools": TOOLS, "chat_template_kwargs": {"thinking": True}},
    {"tools": TOOLS, "chat_template_kwargs": {"thinking": None}},
    {"tools": TOOLS, "chat_template_kwargs": {"enable_thinking": None, "thinking": False}},
    {"tools": TOOLS, "chat_template_kwargs": {"other": 1}},
    {"chat_template_kwargs": {"thinking": 0, "enable_thinking": 1}},
]

__all__ = ["BENCH", "HANDWRITTEN", "PAIRS", "PROMPTS", "REQUESTS", "TOKENS", "TOOLS", "output"]
