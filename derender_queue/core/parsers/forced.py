"""A forced ``tool_choice`` for a parser that keeps vLLM's standard handling.

A vLLM tool parser with ``supports_required_and_named`` (Granite's engine
parser: no structural tag, so ``VLLM_ENFORCE_STRICT_TOOL_CALLING`` leaves it
on) does not parse a forced turn with its own format
(``DelegatingParser._extract_tool_calls``):

* a named tool: the whole content is that function's arguments, as it is
  (blank or no content: no call);
* ``"required"``: the content must be a JSON list of function definitions
  (``TypeAdapter(list[FunctionDefinition]).validate_json``), each a call with
  its ``parameters`` as the arguments; anything else is no call.

Either way the content is then None.  The answer needs the whole content,
so it is held to the end (it is the call's arguments).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from .buffer import TextBuffer
from .deltas import ParsedDelta, ToolCallDelta
from .ids import make_tool_call_id


class _FunctionDefinition(BaseModel):
    """vLLM's ``FunctionDefinition`` (an ``OpenAIBaseModel``: extra fields allowed)."""

    model_config = ConfigDict(extra="allow")
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    defer_loading: bool | None = None


_DEFINITIONS = TypeAdapter(list[_FunctionDefinition])


class ForcedToolStage:
    def __init__(self, named: str | None, state: dict[str, Any] | None = None) -> None:
        self._named = named  # None: "required"
        self._text = TextBuffer((state or {}).get("text", ""))

    def to_state(self) -> dict[str, Any]:
        return {"text": self._text.value()}

    def feed(self, text: str) -> ParsedDelta:
        self._text.append(text)
        return ParsedDelta()

    def finish(self, input_is_none: bool) -> tuple[ParsedDelta, bool]:
        content = None if input_is_none else self._text.value()
        out = ParsedDelta()
        if self._named is not None:
            if content is not None and content.strip():
                out.tool_calls.append(ToolCallDelta(0, id=make_tool_call_id(), name=self._named, arguments=content))
            return out, True
        try:
            calls = _DEFINITIONS.validate_json(content or "")
        except ValidationError:
            calls = []
        for i, call in enumerate(calls):
            arguments = json.dumps(call.parameters, ensure_ascii=False)
            out.tool_calls.append(ToolCallDelta(i, id=make_tool_call_id(), name=call.name, arguments=arguments))
        return out, True
