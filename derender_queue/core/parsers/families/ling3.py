"""Ling 3: GLM-4.7's grammar under its own name (vLLM 0.34 ``parser/ling3.py``;
reasoning and tools ``ling3``).

``Ling3Parser`` subclasses ``Glm47MoeParser`` and builds
``glm47_moe_config(thinking)`` renamed ``ling3``: ``<think>`` reasoning
(thinking on unless ``thinking`` or ``enable_thinking`` is given and both are
falsy, then the output is content as it is), ``<tool_call>`` ending
reasoning, ``<arg_key>``/``<arg_value>`` arguments, names stripped and
validated against the request's tools.  It skips ``Glm47MoeParser.__init__``,
so GLM-5.3's always-thinking template check (not modelled for GLM either) is
not Ling's.  The tool parser keeps no ``supports_required_and_named``
(structural tag ``glm_4_7``), as GLM's.
"""

from __future__ import annotations

from dataclasses import replace

from ..engine.registry import register
from .glm import GLM

LING3 = register(
    replace(
        GLM,
        name="ling3",
        grammar=replace(GLM.grammar, name="ling3"),
        grammar_without_thinking=replace(GLM.grammar_without_thinking, name="ling3")
        if GLM.grammar_without_thinking is not None
        else None,
        reasoning_names=("ling3",),
        tool_names=("ling3",),
    )
)
