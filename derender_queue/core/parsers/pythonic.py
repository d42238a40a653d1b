"""``pythonic`` and ``llama4_pythonic`` tool calls: vLLM 0.34's
``PythonicToolParser`` / ``Llama4PythonicToolParser.extract_tool_calls``.

The whole output is a Python list of calls, ``[get_weather(city="Paris"), f(x=1)]``,
or it is content: vLLM matches its ``TOOL_CALL_REGEX`` at the start, then
``ast.parse``-s the whole text; a list of calls whose keyword values are
literals (``null``/``true``/``false`` too) gives the calls, anything else
(a syntax error, a positional argument, text after the list) the content as
it came.  Llama 4's variant first drops a leading ``<|python_start|>`` and
every ``<|python_end|>``.

Only output starting with ``[`` (or ``<|python_start|>``) can be calls, so
other output streams as it comes; such output is held, all of it, until the
end.  The regex runs after the parse succeeded (same answer: both must pass),
so it only ever sees a well-formed list of calls.  State: the mode and the
held text.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from .buffer import TextBuffer
from .deltas import DeltaBuilder, ParsedDelta, ToolCallDelta
from .ids import make_tool_call_id
from .passage import Passage

PYTHONIC, LLAMA4_PYTHONIC = "pythonic", "llama4_pythonic"
PYTHON_START, PYTHON_END = "<|python_start|>", "<|python_end|>"

_TOOL_CALL_RE = re.compile(
    r"\[([a-zA-Z]+\w*\(([a-zA-Z]+\w*=.*,\s*)*([a-zA-Z]+\w*=.*\s)?\),\s*)*([a-zA-Z]+\w*\(([a-zA-Z]+\w*=.*,\s*)*"
    r"([a-zA-Z]+\w*=.*\s*)?\)\s*)+\]",
    re.DOTALL,
)
_NAME_LITERALS = {"null": None, "true": True, "false": False}
_UNDECIDED, _HOLD, _GO = 0, 1, 2


class _Unexpected(Exception):
    pass


def _value(node: ast.expr) -> Any:
    """``vllm.tool_parsers.utils.get_parameter_value``."""
    if isinstance(node, ast.Constant):
        if node.value is None or isinstance(node.value, (str, int, float)):
            return node.value
        raise _Unexpected
    if isinstance(node, ast.Dict):
        if not all(isinstance(k, ast.Constant) for k in node.keys):
            raise _Unexpected
        return {k.value: _value(v) for k, v in zip(node.keys, node.values, strict=False)}  # type: ignore[union-attr]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [_value(v) for v in node.elts]
    if isinstance(node, ast.JoinedStr) and all(isinstance(p, ast.Constant) for p in node.values):
        return "".join(str(p.value) for p in node.values)  # type: ignore[attr-defined]
    if isinstance(node, ast.Name) and node.id in _NAME_LITERALS:
        return _NAME_LITERALS[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _value(node.operand)
        if isinstance(operand, (int, float)) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
    raise _Unexpected


def _dotted(node: ast.expr) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        raise _Unexpected
    return ".".join([node.id, *reversed(parts)])


def call_list(module: ast.Module) -> list[tuple[str, str]] | None:
    """The calls of a parsed ``[f(a=1), ...]`` (vLLM's ``handle_single_tool``
    on each element), or None when it is not a list of calls."""
    try:
        parsed = getattr(module.body[0], "value", None)
        if not isinstance(parsed, ast.List) or not all(isinstance(e, ast.Call) for e in parsed.elts):
            return None
        calls = []
        for call in parsed.elts:
            assert isinstance(call, ast.Call)
            if not isinstance(call.func, (ast.Name, ast.Attribute)):
                return None
            arguments = {kw.arg: _value(kw.value) for kw in call.keywords}
            calls.append((_dotted(call.func), json.dumps(arguments, ensure_ascii=False)))
    except Exception:  # vLLM: any failure is "treat as regular text"
        return None
    return calls


def pythonic_calls(text: str) -> list[tuple[str, str]] | None:
    """The calls vLLM's ``extract_tool_calls`` finds, or None (content)."""
    try:
        module = ast.parse(text)
    except Exception:  # vLLM: any failure is "treat as regular text"
        return None
    calls = call_list(module)
    return calls if calls is not None and _TOOL_CALL_RE.match(text) else None


class PythonicToolStage:
    def __init__(self, llama4: bool, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self._llama4 = llama4
        self._mode: int = s.get("mode", _UNDECIDED)
        self._held = TextBuffer(s.get("held", ""))

    def to_state(self) -> dict[str, Any]:
        return {"mode": self._mode, "held": self._held.dump()}

    def passage(self) -> Passage | None:
        """Once the output did not start a call list, all of it is content (passage.py)."""
        return Passage("content") if self._mode == _GO else None

    def feed(self, text: str) -> ParsedDelta:
        out = DeltaBuilder()
        if self._mode == _GO:
            out.content(text)
            return out.build()
        self._held.append(text)
        held = self._held.value()
        if self._mode == _HOLD or not held:
            return out.build()
        starts = ["[", PYTHON_START] if self._llama4 else ["["]
        if any(held.startswith(s) for s in starts):
            self._mode = _HOLD
        elif not any(s.startswith(held) for s in starts):
            self._mode = _GO
            self._held.clear()
            out.content(held)
        return out.build()

    def finish(self, input_is_none: bool) -> tuple[ParsedDelta, bool]:
        out = DeltaBuilder()
        held = self._held.value()
        self._held.clear()
        text = held
        if self._llama4 and text.startswith(PYTHON_START):
            text = text[len(PYTHON_START) :].replace(PYTHON_END, "")
        calls = pythonic_calls(text) if self._mode == _HOLD else None
        if calls is None:
            out.content(held)  # the content as it came
            return out.build(), input_is_none
        for index, (name, arguments) in enumerate(calls):
            out.tool_calls.append(ToolCallDelta(index, id=make_tool_call_id(), name=name, arguments=arguments))
        return out.build(), True
