"""A reasoning pass whose blank content swaps places with the reasoning.

``NemotronV3Parser.extract_reasoning`` (vLLM 0.34): when the request's own
``chat_template_kwargs`` say ``enable_thinking: false`` or
``force_nonempty_content: true``, and the reasoning pass's content is None or
whitespace, the reasoning becomes the content (and so the tool pass's input)
and the content, blank, the reasoning.

Which of the two it is is known only once the content shows non-whitespace
text, or at the end: until then the reasoning and the blank content are
held (so the state grows with reasoning that no content follows, as vLLM's
rule decides it only at the end); then everything streams through.
"""

from __future__ import annotations

from typing import Any

from ..buffer import TextBuffer
from .reasoning import EngineReasoningStage


class SwapBlankContentStage:
    reasoning_nullable = True
    content_nullable = True  # swapped: no reasoning is content None

    def __init__(self, inner: EngineReasoningStage, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self._inner = inner
        self._decided: bool = s.get("d", False)
        self._reasoning = TextBuffer(s.get("r", ""))
        self._content: str = s.get("c", "")  # blank so far

    def to_state(self) -> dict[str, Any]:
        return {"in": self._inner.to_state(), "d": self._decided, "r": self._reasoning.dump(), "c": self._content}

    def feed(self, text: str) -> tuple[str, str]:
        return self._hold(*self._inner.feed(text))

    def finish(self) -> tuple[str, str]:
        reasoning, content = self._hold(*self._inner.finish())
        if self._decided:
            return reasoning, content
        held, self._reasoning = self._reasoning.value(), TextBuffer()
        blank, self._content = self._content, ""
        return blank, held  # vLLM: reasoning, content = content, reasoning

    def _hold(self, reasoning: str, content: str) -> tuple[str, str]:
        if self._decided:
            return reasoning, content
        self._reasoning.append(reasoning)
        self._content += content
        if not self._content.strip():
            return "", ""
        self._decided = True
        held, self._reasoning = self._reasoning.value(), TextBuffer()
        text, self._content = self._content, ""
        return held, text
