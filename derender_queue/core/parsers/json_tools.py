"""vLLM 0.34's legacy JSON tool parsers ``granite4``, ``internlm``, ``jamba``
and ``xlam``: each ``extract_tool_calls`` decodes its calls' JSON all or
none over the whole output, so none is a grammar the engine could stream;
``held_tools.py`` holds the text from the first marker (for ``xlam``, all
of it) and runs these at the end.  Each function is vLLM's answer for a text
(``held_tools.Answer``), written from its source:

* ``granite4``: ``<tool_call>{json}</tool_call>`` blocks anywhere; the
  content is the text outside them, joined.  A second start before an end,
  an end without a start, an empty or unclosed block, JSON that is not an
  object with ``name`` and ``arguments`` (a string kept as it is, anything
  else dumped), a name that is not a string: vLLM's assertion or
  ``FunctionCall`` fails, caught, and the output is the content.
* ``internlm``: one call after ``<|action_start|><|plugin|>``, its JSON from
  the first ``{`` to ``<|action_end|>``; the content is the text before.
  vLLM catches nothing there: a second marker or undecodable JSON is a
  server error (HTTP 500); here it is no call, the output the content.
* ``jamba``: the JSON list in the first ``<tool_calls>...</tool_calls>``;
  the content the text before the first ``<tool_calls>`` (``" "`` is None).
  An empty list (or ``{}``, ``""``: Python iterates them) is
  ``tools_called`` without calls.
* ``xlam``: a JSON list found after ``</think>``, in a code block,
  ``[TOOL_CALLS]`` or ``<tool_call>`` block, or the whole output when it
  starts with ``[``; elements without ``name`` or ``arguments`` skipped.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .held_tools import Answer, Calls, Extractor, Tools, register


def _call(name: Any, arguments: Any) -> tuple[str, str] | None:
    """A ``FunctionCall(name=..., arguments=...)``, None where pydantic refuses it."""
    return (name, arguments) if isinstance(name, str) and isinstance(arguments, str) else None


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# ── granite4 ─────────────────────────────────────────────────────────

_G4_START, _G4_END = "<tool_call>", "</tool_call>"
_G4_DELIMS = re.compile(f"(?P<START>{_G4_START})|(?P<END>{_G4_END})")


def granite4(text: str, tools: Tools = None) -> Answer:
    segments, blocks, cut, inside = [], [], 0, False
    for match in _G4_DELIMS.finditer(text):
        if match.lastgroup == "START":
            if inside:
                return None  # "Two tool call start tokens found in a row"
            segments.append(text[cut : match.start()])
            inside = True
        else:
            if not inside or not text[cut : match.start()]:
                return None
            blocks.append(text[cut : match.start()])
            inside = False
        cut = match.end()
    if inside:
        return None  # "The model generated an incomplete tool call"
    segments.append(text[cut:])
    calls: Calls = []
    for block in blocks:
        try:
            value = json.loads(block)
        except (ValueError, RecursionError):
            return None
        if not isinstance(value, dict) or "name" not in value or "arguments" not in value:
            return None
        args = value["arguments"]
        call = _call(value["name"], args if args is None or isinstance(args, str) else _dump(args))
        if call is None:
            return None
        calls.append(call)
    return ("".join(segments), calls) if calls else None


register("granite4", Extractor(granite4, markers=(_G4_START, _G4_END)))

# ── internlm ─────────────────────────────────────────────────────────

_ACTION = "<|action_start|><|plugin|>"


def internlm(text: str, tools: Tools = None) -> Answer:
    if _ACTION not in text:
        return None
    parts = text.split(_ACTION)
    if len(parts) != 2:
        return None  # vLLM: ValueError, a server error
    before, action = parts
    action = action.split("<|action_end|>")[0]
    action = action[action.find("{") :]
    try:
        value = json.loads(action)
    except (ValueError, RecursionError):
        return None  # vLLM: a server error
    if not isinstance(value, dict) or "name" not in value:
        return None  # vLLM: a server error
    call = _call(value["name"], _dump(value.get("parameters", value.get("arguments", {}))))
    if call is None:
        return None
    return before, [call]


register("internlm", Extractor(internlm, markers=(_ACTION,)))

# ── jamba ────────────────────────────────────────────────────────────

_JAMBA_START = "<tool_calls>"
_JAMBA_RE = re.compile(r"<tool_calls>(.*?)</tool_calls>", re.DOTALL)


def jamba(text: str, tools: Tools = None) -> Answer:
    if _JAMBA_START not in text:
        return None
    match = _JAMBA_RE.search(text)
    if match is None:
        return None
    try:
        value = json.loads(match.group(1))
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, (list, dict, str)):
        return None  # not iterable
    calls: Calls = []
    for item in value:  # a dict's keys, a string's characters: not dicts
        if not isinstance(item, dict) or "name" not in item or "arguments" not in item:
            return None
        call = _call(item["name"], _dump(item["arguments"]))
        if call is None:
            return None
        calls.append(call)
    content = text[: text.find(_JAMBA_START)]
    return (content if content != " " else None), calls


register("jamba", Extractor(jamba, markers=(_JAMBA_START,)))

# ── xlam ─────────────────────────────────────────────────────────────

_XLAM_BLOCKS = [
    re.compile(r"```(?:json)?\s*([\s\S]*?)```"),
    re.compile(r"\[TOOL_CALLS\]([\s\S]*?)(?=\n|$)"),
    re.compile(r"<tool_call>([\s\S]*?)</tool_call>"),
]
_XLAM_THINK = re.compile(r"</think>([\s\S]*)")


def _decodes(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _xlam_split(text: str) -> tuple[str | None, str | None]:
    """``xLAMToolParser.preprocess_model_output``: (content, the calls' JSON)."""
    think = _XLAM_THINK.search(text)
    if think:
        content = text[: think.start() + len("</think>")].strip()
        thought = think.group(1).strip()
        if _decodes(thought):
            return content, thought
        for pattern in _XLAM_BLOCKS:
            for found in pattern.findall(thought):
                if _decodes(found):
                    return content, found
    for pattern in _XLAM_BLOCKS:
        for found in pattern.findall(text):
            if _decodes(found):
                return pattern.sub("", text).strip(), found
    if text.strip().startswith("[") and (
        _decodes(text) or ("{" in text and "name" in text and "arguments" in text)
    ):
        return None, text
    return text, None


def xlam(text: str, tools: Tools = None) -> Answer:
    content, found = _xlam_split(text)
    if not found:
        return None
    try:
        value = json.loads(found)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, list):
        return None
    calls: Calls = []
    for item in value:
        if not isinstance(item, dict) or "name" not in item or "arguments" not in item:
            continue
        args = item["arguments"]
        call = _call(item["name"], _dump(args) if isinstance(args, dict) else args)
        if call is None:
            return None
        calls.append(call)
    return (content, calls) if calls else None


register("xlam", Extractor(xlam))
