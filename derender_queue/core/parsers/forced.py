"""Forced tool calls without the tool parser (vLLM 0.34
``DelegatingParser._extract_tool_calls``, ``supports_required_and_named``).

A tool parser whose class names no xgrammar structural tag (with
``VLLM_ENFORCE_STRICT_TOOL_CALLING``, the default, any that does reads forced
calls as "auto") leaves a forced ``tool_choice`` to vLLM's serving layer,
which expects the constrained output structured decoding gives it:

* a named tool: the content (the reasoning pass's, verbatim) is the call's
  arguments, unless it is None or whitespace (then no call);
* ``"required"``: the content is a JSON list of ``{"name", "parameters"}``
  (pydantic's ``list[FunctionDefinition]``); each becomes a call with
  ``json.dumps(parameters, ensure_ascii=False)``; anything else, no call.

The content itself is None either way (``""`` after assembly: the call was
forced).  A named call streams from the content's first non-whitespace text;
a required list is decided at the end, so the content is held until then.
"""

from __future__ import annotations

import json
from typing import Any

from .buffer import TextBuffer
from .deltas import ParsedDelta, ToolCallDelta
from .ids import make_tool_call_id

# pydantic's lax bool from JSON strings.
_BOOL_STRINGS = frozenset({"0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"})


class ForcedToolStage:
    """``named``: the forced function's name, or None for ``"required"``."""

    def __init__(self, named: str | None, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self._named = named
        self._called: bool = s.get("called", False)
        self._held = TextBuffer(s.get("held", ""))  # blank text (named) / the whole content (required)

    def to_state(self) -> dict[str, Any]:
        return {"called": self._called, "held": self._held.value()}

    def feed(self, text: str) -> ParsedDelta:
        out = ParsedDelta()
        if self._named is None or not text:
            self._held.append(text)
        elif self._called:
            out.tool_calls.append(ToolCallDelta(0, arguments=text))
        elif text.strip():
            self._called = True
            held, self._held = self._held.value(), TextBuffer()
            out.tool_calls.append(ToolCallDelta(0, id=make_tool_call_id(), name=self._named, arguments=held + text))
        else:
            self._held.append(text)
        return out

    def finish(self, input_is_none: bool) -> tuple[ParsedDelta, bool]:
        """Flush; the content is None (the caller makes it "")."""
        out = ParsedDelta()
        if self._named is None:
            for index, (name, parameters) in enumerate(function_definitions(self._held.value()) or ()):
                arguments = json.dumps(parameters, ensure_ascii=False)
                out.tool_calls.append(ToolCallDelta(index, id=make_tool_call_id(), name=name, arguments=arguments))
        self._held = TextBuffer()
        return out, True


def function_definitions(text: str) -> list[tuple[str, Any]] | None:
    """``TypeAdapter(list[FunctionDefinition]).validate_json(text)`` as
    (name, parameters) pairs, or None where it raises."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, list):
        return None
    out = []
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return None
        if not _optional(item, "description", lambda v: isinstance(v, str)):
            return None
        if not _optional(item, "parameters", lambda v: isinstance(v, dict)):
            return None
        if not (_optional(item, "strict", _lax_bool) and _optional(item, "defer_loading", _lax_bool)):
            return None
        out.append((item["name"], item.get("parameters")))
    return out


def _optional(item: dict[str, Any], key: str, valid: Any) -> bool:
    value = item.get(key)
    return value is None or bool(valid(value))


def _lax_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, int | float):
        return value in (0, 1)
    return isinstance(value, str) and value.lower() in _BOOL_STRINGS
