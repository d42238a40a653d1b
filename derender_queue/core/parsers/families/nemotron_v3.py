"""Nemotron V3: Qwen3's format under its own reasoning name (vLLM 0.34
``parser/nemotron_v3.py``).

Reasoning ``nemotron_v3`` only (vLLM registers no Nemotron tool parser: its
models use ``qwen3_coder``).  The grammar is Qwen3's with trailing reasoning
whitespace stripped, and one decision vLLM makes in Python: with
``enable_thinking: false`` or ``force_nonempty_content: true`` in the
request's own ``chat_template_kwargs`` (not the resolved ones: a
``reasoning_effort: "none"`` turns thinking off but swaps nothing), a blank
content and the reasoning change places (``engine/swap.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..engine.registry import register
from .qwen3 import GRAMMAR as QWEN3_GRAMMAR
from .qwen3 import QWEN3


def _force_content(sent_kwargs: Mapping[str, Any]) -> bool:
    """``NemotronV3Parser._should_force_content``."""
    return bool(sent_kwargs) and (
        sent_kwargs.get("enable_thinking") is False or sent_kwargs.get("force_nonempty_content") is True
    )


GRAMMAR = replace(QWEN3_GRAMMAR, name="nemotron_v3", strip_trailing_reasoning_whitespace=True)

NEMOTRON_V3 = register(
    replace(QWEN3, name="nemotron_v3", grammar=GRAMMAR, reasoning_names=("nemotron_v3",), tool_names=(),
            swap_blank_content=_force_content)
)
