"""``lfm2`` tool calls: vLLM 0.34's ``Lfm2ToolParser.extract_tool_calls``.

LFM2 / LFM2.5 wrap a Python list of calls in special tokens::

    Let me check.<|tool_call_start|>[get_weather(city="Paris")]<|tool_call_end|>It is sunny.

vLLM takes the text from the first ``<|tool_call_start|>`` to the next
``<|tool_call_end|>`` (or to the end), stripped; it must be ``[...]``.  Its
``ast`` reading is ``pythonic``'s (``pythonic.call_list``, at least one
call), but a text that does not parse is repaired first, each step a no-op
on valid text: control characters inside string literals escaped, leading
zeros of integers dropped, one nested same-style quote closed where only one
closing quote parses, and Python keywords used as argument names renamed
(and restored in the arguments); the first candidate that parses wins.
With calls, the content is the stripped text before the block and after it
(up to the last stray ``<|tool_call_end|>``: LFM2 echoes the call), joined
with ``"\\n"``; otherwise the output as it came.  ``held_tools.py`` streams the
stripped text before the block and holds the rest.
"""

from __future__ import annotations

import ast
import json
import keyword
import re
import warnings

from .held_tools import Answer, Extractor, Tools, register
from .pythonic import call_list

NAME = "lfm2"
START, END = "<|tool_call_start|>", "<|tool_call_end|>"
_LIST = re.compile(r"\[.*\]$", re.DOTALL)
_SUFFIX = "_pyreservedkw_"
_CTRL = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x00": "\\x00"}
_CLOSERS = frozenset(",)]}:")


def _string_end(text: str, i: int) -> int:
    """Index just past the string literal opening at ``text[i]`` (or the end)."""
    quote, j = text[i], i + 1
    while j < len(text):
        if text[j] == "\\" and j + 1 < len(text):
            j += 2
            continue
        if text[j] == quote:
            return j + 1
        j += 1
    return j


def escape_ctrl(text: str) -> str:
    """``escape_ctrl_chars_in_strings``: control characters inside quotes escaped."""
    out, quote, i = [], "", 0
    while i < len(text):
        ch = text[i]
        if not quote:
            quote = ch if ch in "'\"" else ""
            out.append(ch)
        elif ch == "\\" and i + 1 < len(text):
            out.append(text[i : i + 2])
            i += 2
            continue
        elif ch == quote:
            quote = ""
            out.append(ch)
        else:
            out.append(_CTRL.get(ch, ch))
        i += 1
    return "".join(out)


def drop_leading_zeros(text: str) -> str:
    """``normalize_leading_zero_ints``: outside strings, ``07`` -> ``7`` (not
    ``00``, ``07.5``, ``1.07``, ``07e1``, nor digits inside a name)."""
    out, i = [], 0
    while i < len(text):
        ch, j = text[i], i + 1
        if ch in "'\"":
            j = _string_end(text, i)
        elif ch.isalpha() or ch == "_":
            while j < len(text) and (text[j].isalnum() or text[j] == "_"):
                j += 1
        elif ch.isdigit():
            while j < len(text) and (text[j].isdigit() or text[j] == "_"):
                j += 1
            digits = text[i:j].replace("_", "")
            if (digits[0] == "0" and digits.strip("0") and not (i and text[i - 1] == ".")
                    and text[j : j + 1] not in (".", "e", "E", "j", "J")):  # fmt: skip
                out.append(str(int(digits)))
                i = j
                continue
        out.append(text[i:j])
        i = j
    return "".join(out)


def rename_keywords(text: str) -> tuple[str, bool]:
    """``rename_reserved_kwargs``: ``f(from=1)`` -> ``f(from_pyreservedkw_=1)``."""
    out: list[str] = []
    changed = False
    last = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in "'\"":
            end = _string_end(text, i)
            out.append(text[i:end])
            last, i = ch, end
            continue
        if ch.isalpha() or ch == "_":
            j = i
            while j < len(text) and (text[j].isalnum() or text[j] == "_"):
                j += 1
            name = text[i:j]
            k = j
            while k < len(text) and text[k].isspace():
                k += 1
            if (keyword.iskeyword(name) and text[k : k + 1] == "=" and text[k + 1 : k + 2] != "="
                    and last in ("(", ",")):  # fmt: skip
                out.append(name + _SUFFIX)
                changed = True
            else:
                out.append(name)
            last, i = name[-1], j
            continue
        out.append(ch)
        if not ch.isspace():
            last = ch
        i += 1
    return "".join(out), changed


def _escaped(text: str, i: int) -> bool:
    n = 0
    while i - n - 1 >= 0 and text[i - n - 1] == "\\":
        n += 1
    return n % 2 == 1


def close_nested_quote(text: str) -> tuple[str, bool]:
    """``escape_nested_quotes_in_strings``: the first string whose first
    closing quote cannot close it (no ``,)]}:`` after it) is closed at the
    one later quote that makes the text parse, interior quotes escaped."""

    def closes(pos: int) -> bool:
        rest = text[pos + 1 :].lstrip()
        return bool(rest) and rest[0] in _CLOSERS

    i = 0
    while i < len(text):
        quote = text[i]
        if quote not in "'\"":
            i += 1
            continue
        quotes, j = [], i + 1
        while j < len(text):
            if text[j] == "\\":
                j += 2
                continue
            if text[j] == quote:
                quotes.append(j)
            j += 1
        if not quotes:
            return text, False
        if closes(quotes[0]):
            i = quotes[0] + 1
            continue
        winners = []
        for close in (q for q in quotes if closes(q)):
            inner = "".join(("\\" + c) if c == quote and not _escaped(text, k) else c
                            for k, c in enumerate(text[i + 1 : close], start=i + 1))  # fmt: skip
            candidate = text[:i] + quote + inner + quote + text[close + 1 :]
            if _parses(escape_ctrl(candidate)):
                winners.append(candidate)
        return (winners[0], True) if len(winners) == 1 else (text, False)
    return text, False


def _parses(text: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        try:
            ast.parse(text)
        except (SyntaxError, ValueError):
            return False
    return True


def _parse(text: str) -> tuple[ast.Module, bool]:
    """The module and whether keywords were renamed (raises when nothing parses)."""
    try:
        return ast.parse(text), False
    except (SyntaxError, ValueError):
        pass
    escaped = escape_ctrl(drop_leading_zeros(text))
    candidates = [escaped]
    requoted, changed = close_nested_quote(escaped)
    if changed:
        candidates.append(escape_ctrl(requoted))
    renamed_text, renamed = rename_keywords(candidates[-1])
    if renamed:
        candidates.append(renamed_text)
    for candidate in candidates:
        try:
            return ast.parse(candidate), renamed
        except (SyntaxError, ValueError):
            continue
    raise SyntaxError("no candidate parses")


def _restore(arguments: str) -> str:
    value = json.loads(arguments)
    restored = {
        (k[: -len(_SUFFIX)] if isinstance(k, str) and k.endswith(_SUFFIX) and keyword.iskeyword(k[: -len(_SUFFIX)])
         else k): v for k, v in value.items()
    }  # fmt: skip
    return json.dumps(restored, ensure_ascii=False) if restored != value else arguments


def lfm2_calls(text: str, tools: Tools = None) -> Answer:
    start = text.find(START)
    if start == -1:
        return None
    end = text.find(END, start)
    before = text[:start].strip()
    if end == -1:
        block, after = text[start + len(START) :], ""
    else:
        block = text[start + len(START) : end]
        after = text[end + len(END) :]
        after = after[after.rfind(END) + len(END) :] if END in after else after
        after = after.strip()
    block = block.strip()
    if not _LIST.match(block):
        return None
    try:
        module, renamed = _parse(block)
        parsed = getattr(module.body[0], "value", None)
        if not isinstance(parsed, ast.List) or not parsed.elts:
            return None
        calls = call_list(module)
        if calls is None:
            return None
        if renamed:
            calls = [(name, _restore(arguments)) for name, arguments in calls]
    except Exception:  # vLLM: any failure leaves the output as content
        return None
    return "\n".join(p for p in (before, after) if p) or None, calls


register(NAME, Extractor(lfm2_calls, markers=(START,), strip=True))
