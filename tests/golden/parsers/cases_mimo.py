"""MiMo outputs: Qwen3's (<think> reasoning, XML tool calls), whose parameter
values MiMo keeps verbatim."""

from __future__ import annotations

from cases_qwen3 import HANDWRITTEN, PROMPTS, TOKENS, TOOLS, output

PAIRS: list[tuple[str | None, str | None]] = [
    ("mimo", "mimo"),
    ("mimo", None),
    (None, "mimo"),
    ("deepseek_r1", "mimo"),  # a legacy composition
]

BENCH = ("mimo", "mimo", "<tool_call>\n<function=search>\n<parameter=query>\nderender streaming\n"
         "</parameter>\n<parameter=k>\n5\n</parameter>\n</function>\n</tool_call>")

__all__ = ["BENCH", "HANDWRITTEN", "PAIRS", "PROMPTS", "TOKENS", "TOOLS", "output"]
