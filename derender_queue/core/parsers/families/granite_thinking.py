"""Granite 4.2: Qwen3's format under Nemotron V3's config (vLLM 0.34
``parser/granite_thinking.py``, ``granite_toolcall.py``, ``nemotron_v3.py``).

Names: reasoning ``granite_thinking_parser``, tools ``granite_toolcall_parser``.
The grammar is Qwen3's with trailing reasoning whitespace stripped
(``nemotron_v3_config``).  The reasoning parser adds two steps to Qwen3's
``extract_reasoning`` (``Family`` fields, the code in the engine's reasoning
stage): the content loses its leading newlines (the template writes
``\\n</think>\\n``), empty then meaning None; and with ``enable_thinking``
false or ``force_nonempty_content`` true, a turn without content swaps
reasoning and content (Nemotron V3's rule).  The tool parser is Qwen3's
tool pass unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..engine.registry import register
from .qwen3 import GRAMMAR as QWEN3_GRAMMAR
from .qwen3 import QWEN3


def _force_content(kwargs: Mapping[str, Any]) -> bool:
    """``NemotronV3Parser._should_force_content``."""
    return kwargs.get("enable_thinking") is False or kwargs.get("force_nonempty_content") is True


GRANITE_THINKING = register(
    dataclasses.replace(
        QWEN3,
        name="granite_thinking",
        grammar=dataclasses.replace(QWEN3_GRAMMAR, name="granite_thinking_parser",
                                    strip_trailing_reasoning_whitespace=True),
        reasoning_names=("granite_thinking_parser",),
        tool_names=("granite_toolcall_parser",),
        content_lstrip_newlines=True,
        swap_blank_content=_force_content,  # on the request's own kwargs, as Nemotron V3's
        swap_absent_content_only=True,
    )
)
