"""``minimax_m2_append_think`` reasoning: vLLM's
``MiniMaxM2AppendThinkReasoningParser`` (not an engine parser).

It extracts no reasoning: the content is ``"<think>" + output``, so a client
that wants MiniMax M2's reasoning inline gets the tag the template opened.
As a legacy reasoning parser it makes the composition "legacy"
(docs/parsers.md): with an engine tool parser, a turn without calls returns
this content untouched.  State: whether the tag was sent.
"""

from __future__ import annotations

from typing import Any

NAME = "minimax_m2_append_think"
TAG = "<think>"


class AppendThinkStage:
    reasoning_nullable = True  # (None, "<think>" + output)
    content_nullable = True  # never empty

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        self._sent: bool = (state or {}).get("sent", False)

    def to_state(self) -> dict[str, Any]:
        return {"sent": self._sent}

    def feed(self, text: str) -> tuple[str, str]:
        if self._sent:
            return "", text
        self._sent = True
        return "", TAG + text

    def finish(self) -> tuple[str, str]:
        return self.feed("") if not self._sent else ("", "")
