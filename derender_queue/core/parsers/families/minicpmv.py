"""MiniCPM-V: Qwen3's grammar with passthrough markers (vLLM 0.34
``parser/minicpmv.py``, reasoning name ``minicpmv``; no tool parser of its
own: MiniCPM-V writes Qwen3-Coder's XML, ``qwen3_coder`` reads it).

``<|im_end|>`` and the reserved markers ``<reserved_12>``..``<reserved_15>``
(and their ``<|reserved_N|>`` tokens) are dropped in content and reasoning.
With ``enable_thinking`` (default on) the pass is Qwen3's; off, it starts in
content, ``<think>`` opens a reasoning span there and the reasoning is
dropped (``Family.reasoning_without_thinking``).  vLLM builds this config
without turn boundaries, so the prompt never closes reasoning.  vLLM's
``MiniCPMVUnifiedParser`` also turns the model's written ``\\n`` escapes back
into newlines in the final reasoning and content (``parsers/newlines.py``,
applied by the factory to any pair that names ``minicpmv``).
"""

from __future__ import annotations

from dataclasses import replace

from ..engine.grammar import State, Transition
from ..engine.registry import register
from .qwen3 import GRAMMAR as QWEN3_GRAMMAR
from .qwen3 import QWEN3

NAME = "minicpmv"
_PASSTHROUGH = {"IM_END": "<|im_end|>"}
for _index in range(12, 16):
    _PASSTHROUGH[f"RESERVED_TEXT_{_index}"] = f"<reserved_{_index}>"
    _PASSTHROUGH[f"RESERVED_TOKEN_{_index}"] = f"<|reserved_{_index}|>"

GRAMMAR = replace(
    QWEN3_GRAMMAR,
    name=NAME,
    terminals={**QWEN3_GRAMMAR.terminals, **_PASSTHROUGH},
    transitions={
        **QWEN3_GRAMMAR.transitions,
        **{(state, t): Transition(state) for t in _PASSTHROUGH for state in (State.CONTENT, State.REASONING)},
    },
)
# minicpmv_config(thinking=False): a <think> in content opens a (dropped) reasoning span.
GRAMMAR_WITHOUT_THINKING = replace(
    GRAMMAR,
    name="minicpmv_no_thinking",
    transitions={**GRAMMAR.transitions, (State.CONTENT, "THINK_START"): Transition(State.REASONING)},
)

MINICPMV = register(
    replace(
        QWEN3,
        name=NAME,
        grammar=GRAMMAR,
        reasoning_names=(NAME,),
        tool_names=(),
        raw_without_thinking=False,
        turn_boundary_tokens=frozenset(),
        token_id_terminals=QWEN3.token_id_terminals | {"IM_END"} | {t for t in _PASSTHROUGH if "TOKEN" in t},
        reasoning_without_thinking=GRAMMAR_WITHOUT_THINKING,
    )
)
