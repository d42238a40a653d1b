"""Our incremental parser engine: families are data (see docs/parsers.md).

A family (``family.Family``) is a grammar (``grammar.Grammar``: terminals,
transitions, content events, in vLLM 0.34's ``ParserEngineConfig`` terms)
plus the few decisions vLLM makes in code.  The factory composes a reasoning
pass (``reasoning.py``) and a tool pass (``tools.py``) from it, as vLLM's
``DelegatingParser`` composes its adapters, each running the same machine
(``machine.py``) over chunks with a bounded, JSON-able state.
"""

from .registry import (
    EngineReasoning,
    EngineTools,
    reasoning_family,
    reasoning_names,
    register,
    tool_family,
    tool_names,
)

__all__ = [
    "EngineReasoning",
    "EngineTools",
    "reasoning_family",
    "reasoning_names",
    "register",
    "tool_family",
    "tool_names",
]
