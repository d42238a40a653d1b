"""Chat derender's use of the reasoning/tool parsers (derender_queue.core.parsers)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from derender_queue.contract.responses import ChatMessage, ToolCall

from .parsers import ParseRequest, ParserFactory, parse_message
from .stream_state import compact


def stream_start(
    factory: ParserFactory | None, request: ParseRequest | None, prompt_ids: list[int] | None, ref: Any
) -> Any:
    """A stream's first parser state (compacted against `ref`) when the prompt decides it (an engine
    family whose prompt may close reasoning), else None.  The ids are those vLLM's non-streaming parse
    reads: the engine's, else the caller's; read once, the parser state carries the outcome."""
    start = factory.start_state(request, prompt_ids) if factory is not None and request is not None else None
    return None if start is None else compact(start, ref)


class ChatParsing:
    """Parses each choice's text into reasoning, content and tool calls, and
    assembles the message as vLLM's `_parse_and_assemble` does."""

    def __init__(self, factory: ParserFactory, request: ParseRequest) -> None:
        self.factory = factory
        self.request = request

    def message(self, text: str, token_ids: Sequence[int], finish_reason: str | None) -> tuple[ChatMessage, str]:
        parsed = parse_message(self.factory, self.request, text, token_ids, finish_reason)
        calls = [msgspec.convert(call, ToolCall) for call in parsed.tool_calls]
        message = ChatMessage("assistant", parsed.content, reasoning=parsed.reasoning)
        if calls:
            message.tool_calls = calls
        return message, parsed.finish_reason
