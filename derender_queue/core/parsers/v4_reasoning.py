"""``deepseek_v4`` reasoning: the engine's reasoning pass (``extract_reasoning``).

vLLM runs the engine over the output with tool parsing skipped, so only
these rules apply (everything else is text of the current mode):

* reasoning: ``<think>`` is absorbed, ``</think>`` switches to content, a
  tool-call opener ends reasoning and is itself content;
* content: ``<think>`` switches (back) to reasoning, a stray ``</think>`` is
  absorbed;
* unused special tokens (BOS/EOS text) vanish everywhere.

Reasoning is ``rstrip()``-ed at the end, so its trailing whitespace is held
until more reasoning follows.  State: mode, the lexer's held marker prefix
(< 20 chars) and that whitespace run.
"""

from __future__ import annotations

from typing import Any

from . import v4_grammar as g
from .lexer import LiteralLexer

_REASONING, _CONTENT = "reasoning", "content"


class V4ReasoningStage:
    reasoning_nullable = True
    content_nullable = True

    def __init__(
        self,
        lexer: LiteralLexer,
        thinking: bool,
        state: dict[str, Any] | None = None,
    ) -> None:
        self._lexer = lexer
        state = state or {}
        self._mode: str = state.get("mode", _REASONING if thinking else _CONTENT)
        self._held: str = state.get("held", "")
        self._ws: str = state.get("ws", "")

    def to_state(self) -> dict[str, Any]:
        return {"mode": self._mode, "held": self._held, "ws": self._ws}

    def feed(self, text: str) -> tuple[str, str]:
        tokens, self._held = self._lexer.scan(self._held, text)
        return self._run(tokens)

    def finish(self) -> tuple[str, str]:
        tokens, self._held = self._lexer.scan(self._held, "", final=True)
        reasoning, content = self._run(tokens)
        self._ws = ""  # trailing reasoning whitespace is stripped
        return reasoning, content

    def _run(self, tokens: list[tuple[str | None, str]]) -> tuple[str, str]:
        reasoning: list[str] = []
        content: list[str] = []
        for name, text in tokens:
            if name == g.DROP:
                continue
            if self._mode == _REASONING:
                if name == g.THINK_START:
                    continue
                if name == g.THINK_END:
                    self._mode = _CONTENT
                elif name == g.TOOL_START:
                    self._mode = _CONTENT
                    content.append(text)
                else:
                    reasoning.append(text)
            elif name == g.THINK_START:
                self._mode = _REASONING
            elif name != g.THINK_END:
                content.append(text)
        return self._hold_trailing_ws("".join(reasoning)), "".join(content)

    def _hold_trailing_ws(self, reasoning: str) -> str:
        if not reasoning:
            return ""
        text = self._ws + reasoning
        kept = text.rstrip()
        self._ws = text[len(kept) :]
        return kept
