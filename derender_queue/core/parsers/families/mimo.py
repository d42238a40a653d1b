"""MiMo: Qwen3's grammar with verbatim parameter values (vLLM 0.34
``parser/mimo.py``).

Names: reasoning and tools ``mimo``.  ``MiMoParser`` is ``Qwen3Parser`` with
its own config name and argument converter: parameter values are kept as
written (Qwen3 trims one wrapping newline on each side), then re-typed by the
request's tool schema.  Thinking, the turn boundaries and the raw output with
thinking off are Qwen3's.
"""

from __future__ import annotations

import json
from dataclasses import replace

from ..engine.registry import register
from .qwen3 import _PARAM_RE, QWEN3


def mimo_arguments(raw_args: str) -> str:
    """``_mimo_arg_converter(raw_args, partial=False)``: a repeated key keeps
    its first position and its last value."""
    return json.dumps({m.group(1): m.group(2) for m in _PARAM_RE.finditer(raw_args)}, ensure_ascii=False)


MIMO = register(
    replace(
        QWEN3,
        name="mimo",
        grammar=replace(QWEN3.grammar, name="mimo", arg_converter=mimo_arguments),
        reasoning_names=("mimo",),
        tool_names=("mimo",),
    )
)
