"""StepFun: Step-3.5 / 3.7 (``step3p5``, reasoning and tools) and Step-5's
tool parser (``step5``), both Qwen3's grammar (vLLM 0.34 ``parser/step3p5.py``,
``tool_parsers/step5_tool_parser.py``).

* ``step3p5``: ``step3p5_config()`` is ``qwen3_config(thinking=True)`` with
  trailing reasoning whitespace stripped (the model closes with
  ``\\n</think>\\n``); thinking is always on (``enable_thinking`` ignored).
* ``step5`` (tools only): ``qwen3_config(thinking=False)`` that keeps the
  content's whitespace when calls are made (neither stripped nor dropped).

The other Step names are not engines: ``step5`` reasoning is vLLM's
DeepSeek R1 parser (``parsers/r1.py``), ``step3`` reasoning reads up to the
first ``</think>`` (``R1ReasoningStage`` started inside reasoning), and the
``step3`` tool parser has a format of its own (``parsers/step3_tools.py``).
"""

from __future__ import annotations

from dataclasses import replace

from ..engine.family import Family
from ..engine.grammar import State
from ..engine.registry import register
from .qwen3 import GRAMMAR as QWEN3_GRAMMAR
from .qwen3 import QWEN3

STEP3P5 = register(
    replace(
        QWEN3,
        name="step3p5",
        grammar=replace(QWEN3_GRAMMAR, name="step3p5", strip_trailing_reasoning_whitespace=True),
        reasoning_names=("step3p5",),
        tool_names=("step3p5",),
        thinking=lambda kwargs: True,  # Step3p5Parser: thinking_enabled = True
        raw_without_thinking=False,
    )
)

STEP5 = register(
    Family(
        name="step5",
        grammar=replace(QWEN3_GRAMMAR, name="step5", initial_state=State.CONTENT,
                        drop_whitespace_only_content_before_tools=False, strip_content_whitespace_with_tools=False),
        tool_names=("step5",),
    )
)
