"""Mistral outputs with a v11 tokenizer (``[ARGS]`` but no ``[THINK]``, e.g.
Mistral Small 3.2): vLLM's ``none`` config, so the reasoning parser returns
the output as content and ``[THINK]`` is plain text.  The outputs are
``cases_mistral``'s."""

from __future__ import annotations

from cases_mistral import BENCH, HANDWRITTEN, PAIRS, PROMPTS, TOOLS, output

TOKENS = {"special": ["[TOOL_CALLS]", "[ARGS]", "[INST]", "[/INST]", "[CALL_ID]"], "added": []}

__all__ = ["BENCH", "HANDWRITTEN", "PAIRS", "PROMPTS", "TOKENS", "TOOLS", "output"]
