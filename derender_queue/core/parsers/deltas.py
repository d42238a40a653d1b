"""Parser output: incremental deltas and the final message.

A field that is ``None`` in a delta means "nothing new"; a string (even
``""``) means "this field exists and grows by this text".  Folding every
delta of a stream with ``DeltaAccumulator`` therefore gives the one-shot
result, None-versus-"" included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class ToolCallDelta:
    """One OpenAI-style tool call fragment.

    The first fragment of a call carries ``id`` and ``name``; later ones only
    ``arguments`` text to append.
    """

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str | None = None

    def to_openai(self) -> dict[str, Any]:
        """The ``choices[].delta.tool_calls[]`` JSON object."""
        out: dict[str, Any] = {"index": self.index}
        if self.id is not None:
            out["id"] = self.id
            out["type"] = "function"
        function: dict[str, str] = {}
        if self.name is not None:
            function["name"] = self.name
        if self.arguments is not None:
            function["arguments"] = self.arguments
        if function:
            out["function"] = function
        return out


@dataclass(slots=True)
class ParsedDelta:
    reasoning: str | None = None
    content: str | None = None
    tool_calls: list[ToolCallDelta] = field(default_factory=list)

    def __bool__(self) -> bool:
        return (
            self.reasoning is not None
            or self.content is not None
            or bool(self.tool_calls)
        )

    def extend(self, other: ParsedDelta) -> None:
        """Append ``other`` (a later delta) to this one."""
        self.reasoning = _join(self.reasoning, other.reasoning)
        self.content = _join(self.content, other.content)
        self.tool_calls.extend(other.tool_calls)


class DeltaBuilder:
    """Collects one feed's output without quadratic string building."""

    __slots__ = ("_content", "tool_calls")

    def __init__(self) -> None:
        self._content: list[str] = []
        self.tool_calls: list[ToolCallDelta] = []

    def content(self, text: str) -> None:
        if text:
            self._content.append(text)

    def build(self) -> ParsedDelta:
        content = "".join(self._content) if self._content else None
        return ParsedDelta(content=content, tool_calls=self.tool_calls)


def past_blank(held: str, shown: bool, text: str, out: DeltaBuilder) -> tuple[str, bool]:
    """Content whose blank prefix is held (a tool call after it makes the
    content None): `text` goes to `out` once non-blank content has been
    shown; before that it joins the held prefix, all of which goes out with
    the first non-blank text. Returns the held prefix and whether content
    has been shown."""
    if shown:
        out.content(text)
        return held, True
    held += text
    if held.strip():
        out.content(held)
        return "", True
    return held, False


def _join(a: str | None, b: str | None) -> str | None:
    if b is None:
        return a
    return b if a is None else a + b


@dataclass(slots=True)
class ParsedMessage:
    """The non-streaming result for one choice."""

    reasoning: str | None
    content: str | None
    tool_calls: list[dict[str, Any]]
    finish_reason: str
    # vLLM drops logprobs and token ids when a parser is configured and
    # include_reasoning is false: they would leak the hidden reasoning.
    hide_token_metadata: bool


class DeltaAccumulator:
    """Folds a stream of deltas into final reasoning/content/tool calls."""

    def __init__(self) -> None:
        self._reasoning: list[str] | None = None
        self._content: list[str] | None = None
        self._calls: dict[int, tuple[str | None, str, list[str]]] = {}

    def add(self, delta: ParsedDelta) -> None:
        if delta.reasoning is not None:
            self._reasoning = self._reasoning or []
            self._reasoning.append(delta.reasoning)
        if delta.content is not None:
            self._content = self._content or []
            self._content.append(delta.content)
        for tc in delta.tool_calls:
            if tc.index not in self._calls:
                self._calls[tc.index] = (tc.id, tc.name or "", [])
            self._calls[tc.index][2].append(tc.arguments or "")

    @property
    def reasoning(self) -> str | None:
        return None if self._reasoning is None else "".join(self._reasoning)

    @property
    def content(self) -> str | None:
        return None if self._content is None else "".join(self._content)

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """Each call as vLLM's ``ToolCall.model_dump()``."""
        return [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": "".join(args)},
            }
            for call_id, name, args in (self._calls[i] for i in sorted(self._calls))
        ]
