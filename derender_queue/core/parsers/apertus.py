"""``apertus`` tool calls: vLLM 0.34's ``ApertusToolParser.extract_tool_calls``.

Apertus writes a JSON list of one-key objects between special tokens::

    Let me see. <|tools_prefix|>[{"get_weather": {"city": "Paris"}}]<|tools_suffix|>

vLLM reads the text after the first ``<|tools_prefix|>`` up to the next
``<|tools_suffix|>`` (or the end): the first JSON value in it (text after
the value is content), or, when that does not decode, the text completed as
partial JSON by ``partial_json_parser`` (``Allow.ALL``, its fast path:
``complete_partial`` here); a value that is not a list is a list of itself
(of nothing when falsy); every non-empty object is a call, its first key the
name and that key's value the arguments.  Any decoded value means
``tools_called``, even without calls; the content is the stripped text
before the block and the stripped texts after the value and after the
block, joined with ``"\\n"``.  Anything that fails leaves the output as it
came.  ``held_tools.py`` streams the stripped text before the block and
holds the rest.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .held_tools import Answer, Extractor, Tools, register

NAME = "apertus"
PREFIX, SUFFIX = "<|tools_prefix|>", "<|tools_suffix|>"
_BLOCK = re.compile(rf"{re.escape(PREFIX)}(.*?)(?:{re.escape(SUFFIX)}|$)", re.DOTALL)
_STRUCTURE = re.compile(r'["\[\]{}]')

# ── partial JSON (partial_json_parser 0.2's fix_fast with Allow.ALL) ──
# A completion is (end of the kept text, the text to add, or True: complete as it is).
Completion = tuple[int, "str | bool"]


class _Malformed(ValueError):
    pass


def _skip_blank(s: str, i: int) -> int:
    while i < len(s) and s[i].isspace():
        i += 1
    return i


def _complete_any(s: str, top: bool = False) -> Completion | None:
    first = s[_skip_blank(s, 0)]  # IndexError on blank text
    if first == '"':
        return _complete_str(s)
    if first in "1234567890":
        return _complete_num(s, top)
    if first == "[" or first == "{":
        return _complete_container(s)
    for word in ("null", "true", "false", "Infinity"):
        if s.startswith(word):
            return len(word), True
        if word.startswith(s):
            return 0, word
    if first == "-":
        if len(s) == 1:
            return None
        if s[1] != "I":
            return _complete_num(s, top)
    for word in ("-Infinity", "NaN"):
        if s.startswith(word):
            return len(word), True
        if word.startswith(s):
            return 0, word
    raise _Malformed(first)


def _even_backslashes_before(s: str, index: int) -> bool:
    return (index - len(s[:index].rstrip("\\"))) % 2 == 0


def _complete_str(s: str) -> Completion:
    if s[0] != '"':
        raise _Malformed(s[0])
    i = 1
    while i < len(s):
        if s[i] == "\\":
            if i + 1 == len(s):
                break
            i += 2
            continue
        if s[i] == '"':
            return i + 1, True
        i += 1
    # an unfinished string: cut a half-written escape, close it
    for escape, width in (("\\u", 5), ("\\U", 9), ("\\x", 3)):
        at = s.rfind(escape, max(0, i - width), i)
        if at != -1 and _even_backslashes_before(s, at):
            return at, '"'
    return i, '"'


def _complete_num(s: str, top: bool) -> Completion:
    i = 1
    while i < len(s) and s[i] in "1234567890.-+eE":
        i += 1
    cut = False
    while s[i - 1] in ".-+eE":  # (negative indexes as the library's loop has them)
        cut = True
        i -= 1
    return (i, "") if cut or (i == len(s) and not top) else (i, True)


def _complete_container(s: str) -> Completion | None:
    close = "]" if s[0] == "[" else "}"
    kept = j = 1
    try:
        while True:
            j = _skip_blank(s, j)
            if s[j] == close:
                return j + 1, True
            if close == "}":
                key = _complete_str(s[j:])
                if key[1] is not True:
                    return kept, close
                j = _skip_blank(s, j + key[0])
                if s[j] != ":":
                    raise _Malformed(s[j])
                j = _skip_blank(s, j + 1)
            value = _complete_any(s[j:])
            if value is None:
                return kept, close
            if value[1] is not True:
                return j + value[0], str(value[1]) + close
            kept = j = j + value[0]
            j = _skip_blank(s, j)
            if s[j] == ",":
                j += 1
            elif s[j] == close:
                return j + 1, True
            else:
                raise _Malformed(s[j])
    except IndexError:
        return kept, close


def _fix(s: str, top: bool = False) -> tuple[str, str]:
    try:
        done = _complete_any(s.strip(), top)
    except IndexError as err:
        raise _Malformed("") from err
    if done is None:
        raise _Malformed("partial")
    end, tail = done
    return s[:end], "" if tail is True else str(tail)


def _closing(stack: list[tuple[int, str]]) -> str:
    return "".join("}" if c == "{" else "]" for _, c in reversed(stack))


def _after_comma(s: str, comma: int, opener: str, stack: list[tuple[int, str]],
                 outer: list[tuple[int, str]]) -> tuple[str, str]:  # fmt: skip
    head, tail = _fix(opener + s[comma + 1 :])
    if not head[1:] + tail[:-1].strip():
        return s[:comma] + head[1:], tail + _closing(stack[:-1])
    return s[: comma + 1] + head[1:], tail + _closing(outer)


def _fix_fast(s: str) -> tuple[str, str]:
    tokens = [(m.start(), m.group()) for m in _STRUCTURE.finditer(s)]
    if not tokens or tokens[0][1] == '"':
        return _fix(s, top=True)
    stack: list[tuple[int, str]] = []
    in_string, string_start, string_end = False, -1, -1
    for i, char in tokens:
        if char == '"':
            if not in_string:
                in_string, string_start = True, i
            elif _even_backslashes_before(s, i):
                in_string, string_end = False, i
        elif not in_string:
            if char in "]}":
                if stack.pop()[1] != ("[" if char == "]" else "{"):
                    raise _Malformed(char)
            else:
                stack.append((i, char))
    if not stack:
        return s, ""
    if in_string:
        top_at, top_char = stack[-1]
        if top_char == "[":
            head, tail = _fix(s[string_start:])
            return s[:string_start] + head, tail + _closing(stack)
        start = max(string_end, top_at)
        if "," in s[start + 1 : string_start]:
            comma = s.rindex(",", start, string_start)
            head, tail = _fix("{" + s[comma + 1 :])
            return s[:comma] + head[1:], tail + _closing(stack[:-1])
        if ":" in s[start + 1 : string_start]:
            head, tail = _fix(s[string_start:])
            return s[:string_start] + head, tail + _closing(stack)
        return s[:string_start], _closing(stack)
    comma = s.rfind(",", max(string_end, i) + 1)
    if comma != -1:
        if not s[comma + 1 :].strip():
            return s[:comma], _closing(stack)
        if stack[-1][1] != "[":
            raise _Malformed(",")
        return _after_comma(s, comma, "[", stack, stack[:-1])
    if char in "]}":
        if s[i + 1 :].strip():
            raise _Malformed(char)
        return s, _closing(stack)
    if char in "[{":
        head, tail = _fix(s[i:])
        return s[:i] + head, tail + _closing(stack[:-1])
    top_at, top_char = stack[-1]
    if top_char == "[":
        return s, _closing(stack)
    colon = s.rfind(":", string_end)
    comma = s.rfind(",", top_at + 1, string_start)
    if comma == -1:
        head, tail = _fix(s[top_at:])
        return s[:top_at] + head, tail + _closing(stack[:-1])
    if colon == -1:
        if s.rfind(":", max(top_at, comma) + 1, string_start) != -1:
            return s, _closing(stack)
        return _after_comma(s, comma, "{", stack, stack)
    if colon <= comma:
        raise _Malformed(":")
    return _after_comma(s, comma, "{", stack, stack[:-1])


def complete_partial(text: str) -> Any:
    """``partial_json_parser.loads(text, Allow.ALL)`` (any failure raises)."""
    head, tail = _fix_fast(text)
    return json.loads(head + tail)


def apertus_calls(text: str, tools: Tools = None) -> Answer:
    match = _BLOCK.search(text)
    if match is None:
        return None
    try:
        block = match.group(1)
        stripped = block.lstrip()
        try:
            parsed, end = json.JSONDecoder().raw_decode(stripped)
            trailing = stripped[end:]
        except json.JSONDecodeError:
            parsed, trailing = complete_partial(block), ""  # ("Extra data" there cannot decode either)
        if not isinstance(parsed, list):
            parsed = [parsed] if parsed else []
        calls = []
        for item in parsed:
            if isinstance(item, dict) and item:
                name, arguments = next(iter(item.items()))
                calls.append((name, json.dumps(arguments, ensure_ascii=False)))
    except Exception:  # vLLM: any failure leaves the output as content
        return None
    content = text[: match.start()].strip()
    for extra in (trailing.replace(SUFFIX, "").strip() if trailing.strip() else "",
                  text[match.end() :].replace(SUFFIX, "").strip()):  # fmt: skip
        if extra:
            content = (content + "\n" + extra).strip()
    return content or None, calls


register(NAME, Extractor(apertus_calls, markers=(PREFIX,), strip=True))
