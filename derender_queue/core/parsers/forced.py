"""A forced ``tool_choice`` with a tool parser that keeps vLLM's
``supports_required_and_named`` (``DelegatingParser._extract_tool_calls``).

Most tool parsers set a structural tag model, which (with vLLM's default
``VLLM_ENFORCE_STRICT_TOOL_CALLING``) turns the flag off: a ``"required"``
or named tool choice is then parsed like ``"auto"``.  A family whose parser
keeps it says so (``Family.supports_required_and_named``: Seed-OSS, Granite,
...), and vLLM reads the content as the JSON that guided decoding would have
produced instead of the family's grammar:

* named: one call of that tool whose arguments are the content, verbatim;
  no call when the content is blank (or None);
* ``"required"``: the content validated as a JSON list of
  ``FunctionDefinition`` (``name``, ``parameters``...), each item a call with
  ``json.dumps(parameters)``; nothing when it does not validate.

The content itself is dropped either way.  A named call's header is sent
with the first non-blank text and its arguments as they come; a required
list is decided at the end, so its text is the state until then.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from .buffer import TextBuffer
from .deltas import DeltaBuilder, ParsedDelta, ToolCallDelta
from .ids import make_tool_call_id


class _FunctionDefinition(BaseModel):
    """vLLM's ``FunctionDefinition`` (an ``OpenAIBaseModel``: extra keys allowed)."""

    model_config = ConfigDict(extra="allow")
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    defer_loading: bool | None = None


_CALLS = TypeAdapter(list[_FunctionDefinition])


def required_calls(content: str) -> list[tuple[str, str]]:
    """``TypeAdapter(list[FunctionDefinition]).validate_json(content)``."""
    try:
        calls = _CALLS.validate_json(content)
    except ValidationError:
        return []
    return [(c.name, json.dumps(c.parameters, ensure_ascii=False)) for c in calls]


class ForcedToolStage:
    """``named``: the forced function's name, or None for ``"required"``."""

    def __init__(self, named: str | None, state: dict[str, Any] | None = None) -> None:
        self._named = named
        s = state or {}
        self._text = TextBuffer(s.get("text", ""))  # named: blank text so far; required: all of it
        self._started: bool = s.get("started", False)  # named: the call's header was sent

    def to_state(self) -> dict[str, Any]:
        return {"text": self._text.dump(), "started": self._started}

    def feed(self, text: str) -> ParsedDelta:
        out = DeltaBuilder()
        if self._named is None or not text:
            self._text.append(text)
        elif self._started:
            out.tool_calls.append(ToolCallDelta(0, arguments=text))
        else:
            self._text.append(text)
            held = self._text.value()
            if held.strip():
                self._started = True
                self._text.clear()
                out.tool_calls.append(ToolCallDelta(0, id=make_tool_call_id(), name=self._named, arguments=held))
        return out.build()

    def finish(self, input_is_none: bool) -> tuple[ParsedDelta, bool]:
        out = DeltaBuilder()
        if self._named is None:
            calls = required_calls(self._text.value())
            self._text.clear()
            for i, (name, args) in enumerate(calls):
                out.tool_calls.append(ToolCallDelta(i, id=make_tool_call_id(), name=name, arguments=args))
        return out.build(), True
