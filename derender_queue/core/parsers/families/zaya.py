"""ZAYA1: Qwen3's format with ``<zyphra_tool_call>`` wrappers (vLLM 0.34
``parser/zaya.py``).

Names: reasoning ``zaya``; tools ``zaya`` and ``zaya_xml`` (one engine in
vLLM).  ``ZayaParser`` subclasses ``Qwen3Parser`` and changes only the tool
call's two wrapper strings, so this is Qwen3's grammar and family with those
two terminals respelled: thinking rule, raw output without thinking, ChatML
turn boundaries and all.  But its tool parser names no xgrammar structural
tag, so a forced ``tool_choice`` is read by vLLM's serving layer, not by the
grammar (``parsers/forced.py``).  ::

    <think>...</think>
    <zyphra_tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    </function>
    </zyphra_tool_call>
"""

from __future__ import annotations

from dataclasses import replace

from ..engine.registry import register
from .qwen3 import GRAMMAR as QWEN3_GRAMMAR
from .qwen3 import QWEN3

GRAMMAR = replace(
    QWEN3_GRAMMAR,
    name="zaya",
    terminals={**QWEN3_GRAMMAR.terminals, "TOOL_START": "<zyphra_tool_call>", "TOOL_END": "</zyphra_tool_call>"},
)

ZAYA = register(
    replace(QWEN3, name="zaya", grammar=GRAMMAR, reasoning_names=("zaya",), tool_names=("zaya", "zaya_xml"),
            supports_required_and_named=True)  # ZayaEngineToolParser names no structural tag
)
