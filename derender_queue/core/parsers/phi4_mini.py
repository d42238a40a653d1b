"""``phi4_mini_json`` tool calls: vLLM 0.34's ``Phi4MiniJsonToolParser.extract_tool_calls``.

vLLM searches the whole output for ``functools[...]`` (up to the first
``]``) and reads ``[`` + that + ``]`` as a JSON list of calls, each with a
``name`` and ``arguments`` (or ``parameters``).  A match makes the content
None: undecodable JSON gives no calls and still no content; any other
failure (an element without a name, a name that is not a string) makes the
whole output the content.  Without a match the output is the content.

A match anywhere drops all content, so nothing can be sent before the end:
the output is held, all of it (vLLM's own stream sends nothing at all for
this parser).  State: the held text.
"""

from __future__ import annotations

import json
from typing import Any

from .buffer import TextBuffer
from .deltas import DeltaBuilder, ParsedDelta, ToolCallDelta
from .ids import make_tool_call_id
from .passage import Passage, holding
from .spans import first_group

PHI4_MINI_JSON = "phi4_mini_json"
_CALLS = "functools[", "]"  # vLLM: re.search(r"functools\[(.*?)\]", text, re.DOTALL) (spans.py)


def phi4_calls(text: str) -> list[tuple[str, str]] | None:
    """The calls, [] for a match without them, None when the output is content."""
    listed = first_group(text, *_CALLS)
    if listed is None:
        return None
    try:
        parsed: Any = json.loads("[" + listed + "]")
    except json.JSONDecodeError:
        return []
    try:
        calls = []
        for call in parsed:
            args = call["arguments"] if "arguments" in call else call["parameters"]
            if not isinstance(call["name"], str):
                return None  # FunctionCall(name=...) fails validation
            calls.append((call["name"], json.dumps(args, ensure_ascii=False)))
    except Exception:  # vLLM: any failure makes the output content
        return None
    return calls


class Phi4MiniToolStage:
    def __init__(self, state: dict[str, Any] | None = None) -> None:
        self._held = TextBuffer((state or {}).get("held", ""))

    def to_state(self) -> dict[str, Any]:
        return {"held": self._held.dump()}

    def feed(self, text: str) -> ParsedDelta:
        self._held.append(text)
        return ParsedDelta()

    def passage(self) -> Passage:
        return holding("held")  # everything, until the end

    def finish(self, input_is_none: bool) -> tuple[ParsedDelta, bool]:
        out = DeltaBuilder()
        held = self._held.value()
        self._held.clear()
        calls = phi4_calls(held)
        if calls is None:
            out.content(held)
            return out.build(), input_is_none
        for index, (name, arguments) in enumerate(calls):
            out.tool_calls.append(ToolCallDelta(index, id=make_tool_call_id(), name=name, arguments=arguments))
        return out.build(), True
