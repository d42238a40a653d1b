"""Hunyuan's parsers: ``hunyuan_a13b``, ``hy_v3`` and ``hy_v4`` reasoning and
tools, vLLM 0.34's legacy (non-engine) classes, as stages.  ::

    <think>\\nplan\\n</think>\\n<answer>\\nHi\\n</answer>                         (A13B)
    <tool_calls>[{"name": "f", "arguments": {"a": 1}}]</tool_calls>             (A13B)
    <tool_calls><tool_call>f<tool_sep><arg_key>a</arg_key><arg_value>1</arg_value></tool_call></tool_calls>   (V3)
    <tool_calls><tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value></tool_call></tool_calls>             (V4)

Not engine families: vLLM reads each with regular expressions over the whole
text, whose answer is known only at the end.

* ``hunyuan_a13b`` reasoning (``HunyuanA13BReasoningParser.extract_reasoning``):
  ``(?:<think>\\n(.*?)\\n</think>\\n<answer>\\n)?(.*?)\\n</answer>``, else
  ``<think>\\n(.*?)\\n</think>\\n<answer>\\n(.*)`` anywhere, else all content.
  A later marker can change everything before it, so the stage holds the
  whole output until it ends (the state grows with it).
* ``hy_v3`` / ``hy_v4`` reasoning: DeepSeek R1's (``parsers/r1.py``) when the
  resolved ``reasoning_effort`` says think, vLLM's identity parser otherwise
  (``hy_v3``: thinking only for a truthy effort other than ``no_think``;
  ``hy_v4``: an absent effort is ``high``, only ``no_think`` turns it off).
* The tool parsers: the content before a call block streams (a blank prefix
  held: a call makes it None); from the first marker that can start a call
  (or, for A13B, a ``<think>`` region that hides one; for V4, a ``</tool_calls>``
  before it, which makes it refuse the block) the text is held and
  decided at the end.  A13B: the first ``<tool_calls>[...]</tool_calls>``
  outside a ``<think>...</think>`` whose body is JSON is the call list.
  V3: every ``<tool_call>name<tool_sep>args</tool_call>`` anywhere (and an
  unclosed last one) once a ``<tool_calls>`` is in the text, even when none
  parses.  V4 (``strict``): one well-formed ``<tool_calls>`` block or no call.
  The holding is ``held_tools.py``'s stage; these are its extractors.
  ``hunyuan_a13b`` and ``hy_v3`` keep ``supports_required_and_named``
  (``forced.py``); ``hy_v4`` parses a forced tool choice itself.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from bisect import bisect_left
from collections.abc import Callable, Mapping
from typing import Any

from .buffer import TextBuffer
from .deepseek_v3 import IdentityReasoningStage
from .held_tools import Answer, Extractor, Tools, register
from .passage import Passage, holding
from .r1 import R1ReasoningStage
from .spans import spans

A13B, HY_V3, HY_V4 = "hunyuan_a13b", "hy_v3", "hy_v4"
CALLS_START, CALLS_END = "<tool_calls>", "</tool_calls>"
CALL_START, CALL_END = "<tool_call>", "</tool_call>"

# ── reasoning ────────────────────────────────────────────────────────

THINK_START, ANSWER_START, ANSWER_END = "<think>\n", "\n</think>\n<answer>\n", "\n</answer>"


def a13b_reasoning(text: str) -> tuple[str | None, str | None]:
    """``HunyuanA13BReasoningParser.extract_reasoning``: the first match of
    ``(?:<think>\\n(.*?)\\n</think>\\n<answer>\\n)?(.*?)\\n</answer>``, else of
    ``<think>\\n(.*?)\\n</think>\\n<answer>\\n(.*)``, else all content.

    Read with ``str.find``, in linear time: the regular expressions, searched,
    retry at every position and scan to the end from each when the text has
    no ``\\n</answer>`` (quadratic: seconds for a 4000-token output).  Their
    first match is found directly: every lazy group stops at the first
    occurrence of what follows it, because a later one only leaves less text
    for the rest of the pattern to match in.

    * The first pattern matches iff ``\\n</answer>`` occurs, and then at 0
      (its groups may skip everything before): with the optional group when
      the text starts with ``<think>\\n`` and the first answer start after it
      is followed by a ``\\n</answer>``; else without it, the content up to
      the first ``\\n</answer>``.
    * The second matches at the first ``<think>\\n`` when an answer start
      follows it (a later ``<think>\\n`` would only see less text).
    """
    end = text.find(ANSWER_END)
    if end >= 0:
        if text.startswith(THINK_START):
            mid = text.find(ANSWER_START, len(THINK_START))
            if mid >= 0:
                after = mid + len(ANSWER_START)
                close = text.find(ANSWER_END, after)
                if close >= 0:
                    return text[len(THINK_START) : mid] or None, text[after:close] or None
        return None, text[:end] or None
    start = text.find(THINK_START)
    if start >= 0:
        mid = text.find(ANSWER_START, start + len(THINK_START))
        if mid >= 0:
            content = text[mid + len(ANSWER_START) :]  # cannot end with \n</answer>: there is none
            return text[start + len(THINK_START) : mid] or None, content or None
    return None, text


class A13BReasoningStage:
    reasoning_nullable = True

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        self._held = TextBuffer((state or {}).get("held", ""))
        self.content_nullable = True  # decided by finish()

    def to_state(self) -> dict[str, Any]:
        return {"held": self._held.dump()}

    def feed(self, text: str) -> tuple[str, str]:
        self._held.append(text)
        return "", ""

    def passage(self) -> Passage:
        return holding("held")  # everything, until the end

    def finish(self) -> tuple[str, str]:
        text = self._held.value()
        self._held.clear()
        reasoning, content = a13b_reasoning(text)
        # No match: (None, output), so an empty output is content "".
        self.content_nullable = content != text or reasoning is not None
        return reasoning or "", content or ""


def hy_thinking(name: str, chat_template_kwargs: Mapping[str, Any]) -> bool:
    """``HYV3ReasoningParser`` / ``HYV4ReasoningParser.__init__``'s switch
    (the only kwargs vLLM passes are the resolved chat_template_kwargs)."""
    effort = chat_template_kwargs.get("reasoning_effort")
    if name == HY_V3:
        return bool(effort) and effort != "no_think"
    return (effort or "high") != "no_think"


def hy_reasoning(
    name: str, chat_template_kwargs: Mapping[str, Any], state: dict[str, Any] | None
) -> R1ReasoningStage | IdentityReasoningStage:
    if hy_thinking(name, chat_template_kwargs):
        return R1ReasoningStage(state)
    return IdentityReasoningStage()


# ── tools ────────────────────────────────────────────────────────────

# A decider reads the held text: None for no call (the content is the text as
# it came), else the calls and where the content before them ends.
Decider = Callable[[str, list[dict[str, Any]] | None], tuple[list[tuple[str, str]], int] | None]


def _a13b_calls(text: str, _tools: list[dict[str, Any]] | None) -> tuple[list[tuple[str, str]], int] | None:
    """``HunyuanA13BToolParser.extract_tool_calls`` (its content when no call
    is made is never used: the legacy composition keeps the text): its
    ``<tool_calls>([\\s\\S]*?)</tool_calls>`` blocks outside the
    ``<think>(.*?)</think>`` regions."""
    regions = list(spans(text, "<think>", "</think>"))  # disjoint, in order
    starts = [a for a, _ in regions]
    for start, end in spans(text, CALLS_START, CALLS_END):
        # vLLM's any(start > a and end < b for a, b in regions): only the last
        # region opened before the block can hold it
        at = bisect_left(starts, start) - 1
        if at >= 0 and end < regions[at][1]:
            continue
        body = text[start + len(CALLS_START) : end - len(CALLS_END)].strip()
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            continue
        calls = block_calls(data)
        return (calls, start) if calls else None
    return None


def block_calls(data: Any) -> list[tuple[str, str]] | None:
    """A ``<tool_calls>`` block's JSON as (name, arguments) pairs, or None
    where vLLM's parse of it fails (no list; a name or arguments of another type)."""
    if not isinstance(data, list):
        return None
    calls = []
    for call in data:
        if not isinstance(call, dict) or "name" not in call or "arguments" not in call:
            continue
        name, args = call["name"], call["arguments"]
        if isinstance(args, dict):
            args = json.dumps(args, ensure_ascii=False)
        if not isinstance(name, str) or not isinstance(args, str):
            return None  # FunctionCall(...) fails validation; vLLM catches it
        calls.append((name, args))
    return calls


_V3_CALL = re.compile(r"<tool_call>(.*?)<tool_sep>(.*?)</tool_call>", re.DOTALL)
_V3_PORTION = re.compile(r"<tool_call>(.*?)<tool_sep>(.*)", re.DOTALL)
# vLLM's patterns use the `regex` module, whose \s leaves out U+001C..U+001F.
_V3_ARGS = re.compile(r"<arg_key>(.*?)</arg_key>[^\S\x1c-\x1f]*<arg_value>(.*?)</arg_value>", re.DOTALL)
_V4_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_V4_ARGS = re.compile(r"<arg_key>(.*?)</arg_key><arg_value>(.*?)</arg_value>", re.DOTALL)


def _v3_calls(text: str, tools: list[dict[str, Any]] | None) -> tuple[list[tuple[str, str]], int] | None:
    """``HYV3ToolParser.extract_tool_calls``: a ``<tool_calls>`` means
    "called", even when no call parses."""
    cut = text.find(CALLS_START)
    if cut < 0:
        return None
    found = _V3_CALL.findall(text)
    if found:
        found += _V3_PORTION.findall(text.split(CALL_END)[-1])
    else:
        found = _V3_PORTION.findall(text)
    calls = []
    try:
        for name, args in found:
            name = name.strip()
            values = {key: _parse_value(value, name, key, tools) for key, value in _V3_ARGS.findall(args.strip())}
            calls.append((name, json.dumps(values, ensure_ascii=False)))
    except Exception:  # vLLM logs any error and returns no calls
        calls = []  # vLLM logs the error and returns no calls
    return calls, cut


def _v4_calls(text: str, tools: list[dict[str, Any]] | None) -> tuple[list[tuple[str, str]], int] | None:
    """``HYV4ToolExtractor._extract_tool_calls_strict``: anything malformed
    and the whole text is the content."""
    start, end = text.find(CALLS_START), text.find(CALLS_END)
    if start < 0 or end < start:
        return None
    block = text[start + len(CALLS_START) : end]
    bodies = _V4_CALL.findall(block)
    opened = block.count(CALL_START)
    if opened != block.count(CALL_END) or opened != len(bodies) or not bodies:
        return None
    calls = []
    for body in bodies:
        at = body.find("<arg_key>")
        name, args = (body.strip(), "") if at < 0 else (body[:at].strip(), body[at:].strip())
        if not name:
            return None
        if any(args.count(f"<{t}>") != args.count(f"</{t}>") for t in ("arg_key", "arg_value")):
            return None
        if _V4_ARGS.sub("", args).strip():
            return None
        try:
            values = {key: _parse_value(value, name, key, tools) for key, value in _V4_ARGS.findall(args)}
            calls.append((name, json.dumps(values, ensure_ascii=False)))
        except Exception:  # vLLM falls back to the raw content on any error
            return None
    return calls, start


def _answer(decide: Decider) -> Callable[[str, Tools], Answer]:
    """A decider as ``held_tools``' extract: the content before the calls, and the calls."""

    def extract(text: str, tools: Tools) -> Answer:
        decided = decide(text, tools)
        return None if decided is None else (text[: decided[1]], decided[0])

    return extract


# The stage holds from the first of the markers (held_tools.py); vLLM keeps
# supports_required_and_named for A13B and V3, hy_v4 parses a forced choice as auto.
register(A13B, Extractor(_answer(_a13b_calls), markers=(CALLS_START, "<think>")))
register(HY_V3, Extractor(_answer(_v3_calls), markers=(CALLS_START, CALL_START)))
# V4 refuses a block whose first </tool_calls> comes before its <tool_calls>.
register(HY_V4, Extractor(_answer(_v4_calls), markers=(CALLS_START, CALLS_END), supports_required_and_named=False))

# ── argument values (HYV3ToolParser._parse_value, hy_v4's alike) ───────

_TYPE_ALIASES = {"str": "string", "text": "string", "varchar": "string", "char": "string", "enum": "string",
                 "bool": "boolean", "binary": "boolean", "int": "integer", "float": "number", "double": "number",
                 "list": "array", "dict": "object", "map": "object"}  # fmt: skip


def _normalize_type(raw: Any) -> Any:
    exact = _TYPE_ALIASES.get(raw)
    if exact is not None:
        return exact
    lower = raw.lower()  # a type that is not a string raises, as in vLLM
    if lower.startswith(("int", "uint", "long", "short", "unsigned")):
        return "integer"
    if lower.startswith(("num", "float")):
        return "number"
    return raw


def _types(function: str, key: str, tools: list[dict[str, Any]] | None) -> set[Any]:
    schema: dict[str, Any] = {}
    for tool in tools or ():
        fn = tool.get("function", tool)
        if fn.get("name") == function:
            params = fn.get("parameters")
            schema = {} if params is None else params.get("properties", {}).get(key, {})
            break
    if "type" in schema:
        options = [{"type": t} for t in schema["type"]] if isinstance(schema["type"], list) else [schema]
    elif "anyOf" in schema:
        options = schema["anyOf"]
    elif "oneOf" in schema:
        options = schema["oneOf"]
    else:
        options = [{"type": "string"}]
    return {_normalize_type(o.get("type", "string")) for o in options} - {"null"}


def _literal(value: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        return ast.literal_eval(value)


def _parse_value(value: str, function: str, key: str, tools: list[dict[str, Any]] | None) -> Any:
    types = _types(function, key, tools)
    if "boolean" in types and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if "integer" in types:
        try:
            return int(value)
        except ValueError:
            pass
    if "number" in types:
        try:
            return float(value) if any(c in value for c in ".eE") else int(value)
        except ValueError:
            pass
    if types - {"string", "boolean", "integer", "number"}:
        try:
            return json.loads(value)
        except ValueError:
            pass
    if "string" in types:
        return value
    for decode in (json.loads, _literal):
        try:
            return decode(value)
        except Exception:  # vLLM's _deserialize tries each
            continue
    return value
