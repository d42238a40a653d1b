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
# How a family's ParserEngine subclass reads a slot's name (its
# ``_emit_name_delta`` / ``_handle_tool_end`` overrides): (raw name, raw
# arguments, the request's ``_accept_tool_name``) -> the name vLLM's slot ends
# with, before ``strip()``; "" for none (then the arguments are read as JSON).
# Arguments None: not known yet; then only a name no argument text can change,
# or "".  ``vllm_name`` is ParserEngine's own; Kimi K2 reads its
# ``functions.NAME:0`` headers, GLM strips the name.
NameRule = Callable[[str, str | None, Accept], str]


def name_in_args(raw_args: str) -> str:
    """``ParserEngine._try_extract_name``: the first ``"name": "..."`` in the
    arguments (the leftmost match, which more text cannot move), or ""."""
    m = _NAME_RE.search(raw_args)
    return m.group(1) if m else ""


def vllm_name(raw_name: str, raw_args: str | None, accept: Accept) -> str:
    """ParserEngine's reading: the raw name; a nameless slot adopts the name
    its arguments give once the request accepts it."""
    if raw_name or raw_args is None:
        return raw_name
    found = name_in_args(raw_args)
    return found if accept(found) else ""


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
        return [self.name.dump(), self.args.dump(), self.header]

    @classmethod
    def from_state(cls, state: list[Any]) -> Slot:
        return cls(state[0], state[1], state[2])

    def final_name(self, accept: Accept, rule: NameRule = vllm_name) -> str | None:
        """The call's name if it is already decided: a non-empty stripped
        name the request accepts (its arguments cannot undo that)."""
        name = rule(self.name.value(), None, accept).strip()
        return name if name and accept(name) else None

    def end_name(self, accept: Accept, rule: NameRule = vllm_name) -> str:
        """The name vLLM's slot ends with (``NameRule``), accepted or not."""
        return rule(self.name.value(), self.args.value(), accept)

    def announced_name(self, accept: Accept, rule: NameRule = vllm_name) -> str:
        """The name vLLM's event pass sent a delta for, or ""."""
        name = self.end_name(accept, rule)
        return name if accept(name) else ""

    def announces(self, accept: Accept, rule: NameRule = vllm_name) -> bool:
        """Whether vLLM's event pass emitted a delta for this slot (asked at
        its end, or once its name is final): its name is accepted, "" too
        where the family accepts that (Mistral)."""
        return accept(self.end_name(accept, rule))

    def call(
        self, converter: ArgConverter | None, tools: Tools, accept: Accept, rule: NameRule = vllm_name, *,
        json_envelope: bool = True, args_json: Callable[[str], str] | None = None,
        envelope_keys: tuple[str, ...] = ("arguments", "parameters"),
    ) -> tuple[str, str] | None:
        """(name, arguments JSON) as ``_build_extracted_result`` builds it;
        ``json_envelope`` is whether ``_extract_name_and_args`` reads a
        nameless body as ``{"name", "arguments"}``, ``args_json`` a family's
        ``_extract_args_json`` (``Grammar.json_envelope``, ``args_json``)."""
        raw_name, raw_args = self.name.value(), self.args.value()
        if not raw_name and not raw_args:
            return None
        raw_name = rule(raw_name, raw_args, accept)
        name: Any = raw_name.strip()
        if not name and raw_args.strip():
            name, args = (name_and_args_from_json(raw_args, envelope_keys) if json_envelope
                          else ("", _fallback(raw_args, args_json, envelope_keys)))
        elif raw_args.strip():
            args = _convert(raw_args, converter, args_json, envelope_keys)
        else:
            args = "{}"
        if not accept(name):
            return None
        return name, fix_arg_types(args, name, tools)


def _convert(
    raw_args: str, converter: ArgConverter | None, args_json: Callable[[str], str] | None = None,
    keys: tuple[str, ...] = ("arguments", "parameters"),
) -> str:
    if converter is not None:
        try:
            return converter(raw_args)
        except (ValueError, TypeError):
            pass
    return _fallback(raw_args, args_json, keys)


def _fallback(raw_args: str, args_json: Callable[[str], str] | None, keys: tuple[str, ...]) -> str:
    return args_json(raw_args) if args_json is not None else name_and_args_from_json(raw_args, keys)[1]
