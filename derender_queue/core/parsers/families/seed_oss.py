"""Seed-OSS: Qwen3's grammar with ``seed:`` wrapper tokens (vLLM 0.34
``parser/seed_oss.py``, ``SeedOssParser(Qwen3Parser)``; reasoning and tool
name ``seed_oss``).  ::

    <seed:think>...</seed:think>
    <seed:tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    </function>
    </seed:tool_call>

Everything but the four wrapper spellings and the turn boundary tokens is
Qwen3's (``families/qwen3.py``: transitions, argument converter, the
``enable_thinking`` switch).  Unlike Qwen3's, vLLM's Seed-OSS tool parser
has no structural tag model, so it keeps ``supports_required_and_named``:
a ``"required"`` or named ``tool_choice`` reads the content as JSON instead
of this grammar (``parsers/forced.py``).
"""

from __future__ import annotations

from dataclasses import replace

from ..engine.registry import register
from .qwen3 import GRAMMAR as QWEN3_GRAMMAR
from .qwen3 import QWEN3

GRAMMAR = replace(
    QWEN3_GRAMMAR,
    name="seed_oss",
    terminals={
        **QWEN3_GRAMMAR.terminals,
        "THINK_START": "<seed:think>", "THINK_END": "</seed:think>",
        "TOOL_START": "<seed:tool_call>", "TOOL_END": "</seed:tool_call>",
    },
)

SEED_OSS = register(
    replace(
        QWEN3,
        name="seed_oss",
        grammar=GRAMMAR,
        reasoning_names=("seed_oss",),
        tool_names=("seed_oss",),
        turn_boundary_tokens=frozenset({"<seed:bos>", "<seed:eos>"}),
        supports_required_and_named=True,
    )
)
