"""DeepSeek V4 output grammar: the terminals of vLLM 0.33's ``deepseek_v4_config``.

::

    <think>...</think>
    <｜DSML｜tool_calls>
    <｜DSML｜invoke name="f">
    <｜DSML｜parameter name="p" string="true">v</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜tool_calls>
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .lexer import LiteralLexer

DSML = "｜DSML｜"

THINK_START = "THINK_START"
THINK_END = "THINK_END"
TOOL_START = "TOOL_START"
TOOL_END = "TOOL_END"
INVOKE_PREFIX = "INVOKE_PREFIX"
INVOKE_NAME_END = "INVOKE_NAME_END"
INVOKE_END = "INVOKE_END"
PARAM_START = "PARAM_START"
PARAM_CLOSE = "PARAM_CLOSE"
# Tokenizer special tokens the grammar does not use (BOS/EOS): vLLM's engine
# lexes their text and drops it in every state.
DROP = "DROP"

LITERALS: dict[str, str] = {
    "<think>": THINK_START,
    "</think>": THINK_END,
    f"<{DSML}tool_calls>": TOOL_START,
    # Spelling variants vLLM accepts for the opener (not for the closer).
    f"<{DSML}toolcalls>": TOOL_START,
    f"<{DSML}tool>": TOOL_START,
    f"</{DSML}tool_calls>": TOOL_END,
    f'<{DSML}invoke name="': INVOKE_PREFIX,
    '">': INVOKE_NAME_END,
    f"</{DSML}invoke>": INVOKE_END,
    f"<{DSML}parameter": PARAM_START,
    f"</{DSML}parameter>": PARAM_CLOSE,
}


def build_lexer(special_tokens: Iterable[str]) -> LiteralLexer:
    """The engine's lexer: grammar literals plus droppable special tokens."""
    literals = dict(LITERALS)
    for token in special_tokens:
        if token and token not in literals:
            literals[token] = DROP
    return LiteralLexer(literals)


def thinking_enabled(chat_template_kwargs: Mapping[str, Any]) -> bool:
    """``DeepSeekV4Parser.__init__``: does output start inside reasoning?"""
    kw = chat_template_kwargs
    thinking = bool(kw.get("thinking") or kw.get("enable_thinking"))
    if "thinking" not in kw and "enable_thinking" not in kw:
        thinking = True
    return thinking and kw.get("reasoning_effort") != "none"
