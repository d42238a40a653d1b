"""One tool call slot of the tool pass, and how vLLM turns it into a call.

The engine appends a slot's ``TOOL_NAME`` and ``ARG`` text raw; when the slot
ends, ``ParserEngine._build_extracted_result`` decides the call: the stripped
name, else a name read from the arguments as JSON, the arguments converted by
the family's converter (JSON fallback) and re-typed by the request's tool
schema.  ``ParserEngine._events_to_delta`` separately notes whether the slot
produced a streaming delta, which decides whether text after the first call
is kept (see ``gate.py``); that test is ``announces``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..buffer import TextBuffer
from ..dsml import name_and_args_from_json
from ..schema import Tools, fix_arg_types
from .grammar import ArgConverter

# ParserEngine._NAME_RE (regex module): stdlib \s also matches U+001C..U+001F.
_NAME_RE = re.compile(r'"name"[^\S\x1c-\x1f]*:[^\S\x1c-\x1f]*"([^"]*)"')

Accept = Callable[[Any], bool]


def make_accept(tools: Tools, validate: bool) -> Accept:
    """vLLM's ``_accept_tool_name``.  A name that is not a string (from a
    nameless body's JSON) makes vLLM fail validation (HTTP 500); here the
    call is dropped instead."""
    names = {(t.get("function") or {}).get("name") for t in tools or ()} if validate and tools else None

    def accept(name: Any) -> bool:
        return isinstance(name, str) and bool(name) and (names is None or name in names)

    return accept


class Slot:
    """The raw text of the call being parsed."""

    __slots__ = ("args", "header", "name")

    def __init__(self, name: str = "", args: str = "", header: int | None = None) -> None:
        self.name = TextBuffer(name)
        self.args = TextBuffer(args)
        self.header = header  # our call index once its header was sent

    def to_state(self) -> list[Any]:
        return [self.name.value(), self.args.value(), self.header]

    @classmethod
    def from_state(cls, state: list[Any]) -> Slot:
        return cls(state[0], state[1], state[2])

    def final_name(self, accept: Accept) -> str | None:
        """The call's name if it is already decided: a non-empty stripped
        name the request accepts (its arguments cannot undo that)."""
        name = self.name.value().strip()
        return name if name and accept(name) else None

    def announced_name(self, accept: Accept, strip: bool = False) -> str:
        """The name vLLM's event pass sent a delta for, or "".  A nameless
        slot adopts a ``"name": "..."`` found in its arguments (the leftmost
        match, which more text cannot move).  With ``strip`` (GLM) the name
        is stripped first; a blank one is looked up in the arguments at the
        call's end, unstripped (``_handle_tool_end``), a found one stripped
        while arguments stream (``_emit_name_delta``)."""
        raw = self.name.value()
        if raw and not strip:
            return raw if accept(raw) else ""
        if raw and raw.strip():
            return raw.strip() if accept(raw.strip()) else ""
        m = _NAME_RE.search(self.args.value())
        if m is None:
            return ""
        found = m.group(1)
        if strip and not raw and accept(found.strip()):
            return found.strip()
        return found if accept(found) else ""

    def announces(self, accept: Accept, strip: bool = False) -> bool:
        """Whether vLLM's event pass emitted a delta for this slot."""
        return bool(self.announced_name(accept, strip))

    def call(
        self, converter: ArgConverter | None, tools: Tools, accept: Accept, strip: bool = False
    ) -> tuple[str, str] | None:
        """(name, arguments JSON) as ``_build_extracted_result`` builds it."""
        raw_name, raw_args = self.name.value(), self.args.value()
        if not raw_name and not raw_args:
            return None
        raw_name = self.announced_name(accept, strip) or (raw_name.strip() if strip else raw_name)
        name: Any = raw_name.strip()
        if not name and raw_args.strip():
            name, args = name_and_args_from_json(raw_args)
        elif raw_args.strip():
            args = _convert(raw_args, converter)
        else:
            args = "{}"
        if not accept(name):
            return None
        return name, fix_arg_types(args, name, tools)


def _convert(raw_args: str, converter: ArgConverter | None) -> str:
    if converter is not None:
        try:
            return converter(raw_args)
        except (ValueError, TypeError):
            pass
    return name_and_args_from_json(raw_args)[1]
