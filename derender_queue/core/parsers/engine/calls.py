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


def make_accept(tools: Tools, validate: bool, empty: bool = False) -> Accept:
    """vLLM's ``_accept_tool_name`` (``empty``: a family's override that takes
    "" too).  A name that is not a string (from a nameless body's JSON) makes
    vLLM fail validation (HTTP 500); here the call is dropped instead."""
    names = {(t.get("function") or {}).get("name") for t in tools or ()} if validate and tools else None

    def accept(name: Any) -> bool:
        return isinstance(name, str) and (bool(name) or empty) and (names is None or name in names)

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

    def announced_name(self, accept: Accept, names_in_args: bool = True) -> str:
        """The name vLLM's event pass sent a delta for, or "".  A nameless
        slot adopts a ``"name": "..."`` found in its arguments (the leftmost
        match, which more text cannot move) unless the family reads no
        names there (``Grammar.tool_names_in_args``)."""
        raw = self.name.value()
        if raw:
            return raw if accept(raw) else ""
        m = _NAME_RE.search(self.args.value()) if names_in_args else None
        return m.group(1) if m and accept(m.group(1)) else ""

    def announces(self, accept: Accept, names_in_args: bool = True) -> bool:
        """Whether vLLM's event pass emitted a delta for this slot (asked at
        its end, or once its name is final); a family that accepts "" as a
        name announces a nameless slot too."""
        return bool(self.announced_name(accept, names_in_args)) or (not self.name.value() and accept(""))

    def call(
        self, converter: ArgConverter | None, tools: Tools, accept: Accept, *, names_in_args: bool = True,
        args_json: Callable[[str], str] | None = None,
    ) -> tuple[str, str] | None:
        """(name, arguments JSON) as ``_build_extracted_result`` builds it;
        ``args_json`` is a family's ``_extract_args_json``."""
        raw_name, raw_args = self.name.value(), self.args.value()
        if not raw_name and not raw_args:
            return None
        raw_name = raw_name or self.announced_name(accept, names_in_args)
        name: Any = raw_name.strip()
        if not name and raw_args.strip():
            name, args = name_and_args_from_json(raw_args) if names_in_args else ("", _fallback(raw_args, args_json))
        elif raw_args.strip():
            args = _convert(raw_args, converter, args_json)
        else:
            args = "{}"
        if not accept(name):
            return None
        return name, fix_arg_types(args, name, tools)


def _convert(raw_args: str, converter: ArgConverter | None, args_json: Callable[[str], str] | None = None) -> str:
    if converter is not None:
        try:
            return converter(raw_args)
        except (ValueError, TypeError):
            pass
    return _fallback(raw_args, args_json)


def _fallback(raw_args: str, args_json: Callable[[str], str] | None) -> str:
    return args_json(raw_args) if args_json is not None else name_and_args_from_json(raw_args)[1]
