"""The held parsers read their output in linear time (``parsers/hunyuan.py``,
``parsers/spans.py``: ``hunyuan_a13b``, ``phi4_mini_json``, ``olmo3``, ``minicpm5``;
``ernie45``'s ``<tool_call>\\s*({.*?})\\s*</tool_call>``).

vLLM 0.34 reads A13B's reasoning and tool calls with lazy regular
expressions, searched over the whole output.  Where what closes them never
comes (an output without ``\\n</answer>``, the usual case; ``<tool_calls>``
or ``<think>`` without their closers), the search retries at every position
and scans to the end from each: quadratic (2 s for the bench's 4000-token
output).  The parser finds the same first match with ``str.find``; so do
``spans`` for ``functools[...]``, ``<function_calls>...</function_calls>``
(a search each) and ``<function...</function>`` (every match), the regular
expressions of ``phi4_mini_json``, ``olmo3`` and ``minicpm5``.

Checked here: the answers equal the regular expressions' on any text made of
the markers' pieces, and the work is a fixed number of linear C calls
(``str.find``, ``startswith``), no regular expression, whatever the text's
length or its markers (counted with ``sys.setprofile``, not timed).
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from derender_queue.core.parsers import hunyuan
from derender_queue.core.parsers.spans import first_span, spans

# vLLM 0.34's patterns (HunyuanA13BReasoningParser, HunyuanA13BToolParser).
FULL = re.compile(r"(?:<think>\n(.*?)\n</think>\n<answer>\n)?(.*?)\n</answer>", re.DOTALL)
HALF = re.compile(r"<think>\n(.*?)\n</think>\n<answer>\n(.*)", re.DOTALL)
BLOCK = re.compile(r"<tool_calls>([\s\S]*?)</tool_calls>")
THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)

FRAGMENTS = ["<think>\n", "\n</think>\n<answer>\n", "\n</answer>", "<think>", "</think>", "<answer>", "</answer>",
             "\n", "x", "<tool_calls>", "</tool_calls>", '[{"name": "f", "arguments": {"a": 1}}]', "[]", "[bad",
             '{"name": "f"}', " "]  # fmt: skip


def reference_reasoning(text: str) -> tuple[str | None, str | None]:
    """``extract_reasoning`` as vLLM writes it (findall()[0] is the first match)."""
    found = FULL.findall(text)
    if found:
        reasoning, content = found[0]
        return reasoning or None, content or None
    found = HALF.findall(text)
    if found:
        reasoning, content = found[0]
        return reasoning or None, content.removesuffix("\n</answer>") or None
    return None, text


def reference_calls(text: str) -> tuple[list[tuple[str, str]], int] | None:
    """``_a13b_calls`` with vLLM's regular expressions and region test."""
    regions = [m.span() for m in THINK.finditer(text)]
    for block in BLOCK.finditer(text):
        start, end = block.span()
        if any(start > a and end < b for a, b in regions):
            continue
        try:
            data = json.loads(block.group(1).strip())
        except ValueError:
            continue
        calls = hunyuan.block_calls(data)  # the same decoding: what differs is finding the blocks
        return (calls, start) if calls else None
    return None


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=14))
def test_a13b_answers_equal_vllm_regular_expressions(parts):
    text = "".join(parts)
    assert hunyuan.a13b_reasoning(text) == reference_reasoning(text)
    assert hunyuan._a13b_calls(text, None) == reference_calls(text)


def c_calls(fn: Callable[[], Any]) -> Counter[str]:
    """The C functions ``fn`` calls, by name, and how often."""
    seen: Counter[str] = Counter()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "c_call" and arg is not sys.setprofile:
            seen[getattr(arg, "__qualname__", repr(arg))] += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return seen


LONG = 20_000
SCANS = {"Pattern.search", "Pattern.finditer", "Pattern.findall", "Pattern.sub", "Pattern.split", "Pattern.fullmatch"}


def test_a13b_reasoning_work_does_not_grow_with_the_text():
    """The texts that made vLLM's search quadratic (no ``\\n</answer>``; many
    ``<think>\\n`` without an answer start), long: a few finds, no regex."""
    for text in ["<think>\n" + "word " * LONG + "\n</think>\n<answer>\nHi",
                 "<think>\n" * LONG,
                 "x" * LONG + "<think>\nr\n</think>\n<answer>\n" + "\n" * LONG,
                 "<think>\nr\n</think>\n<answer>\nHi\n</answer>" + "<think>\n" * LONG]:  # fmt: skip
        calls = c_calls(lambda t=text: hunyuan.a13b_reasoning(t))
        assert set(calls) <= {"str.find", "str.startswith", "len"}, calls
        assert calls["str.find"] + calls["str.startswith"] <= 4, calls


def test_a13b_calls_work_grows_with_the_blocks_not_the_text():
    """Unclosed ``<tool_calls>`` / ``<think>`` (each a scan to the end for the
    regex): two finds for each closed block or region, one more each to stop."""
    closed = "<think>a</think><tool_calls>[bad</tool_calls>" * 50
    for text, blocks in [("<tool_calls>[" * LONG, 0), ("<think>" * LONG + "<tool_calls>[bad" * LONG, 0),
                         (closed + "<tool_calls>" * LONG, 100)]:  # fmt: skip
        calls = c_calls(lambda t=text: hunyuan._a13b_calls(t, None))
        assert not SCANS & set(calls), calls  # (json.loads matches its whitespace: Pattern.match)
        assert calls["str.find"] <= 2 * blocks + 4, calls


LITERALS = [("<think>", "</think>"), ("functools[", "]"), ("<function_calls>", "</function_calls>"),
            ("<function", "</function>"), ("<tool_calls>", "</tool_calls>"), ("aa", "a"), ("ab", "ba")]  # fmt: skip


@settings(max_examples=800, deadline=None)
@given(st.sampled_from(LITERALS), st.lists(st.sampled_from(["a", "b", "x", "\n", "]", "[", "<", ">", "/"]), max_size=6),
       st.lists(st.integers(0, 4), max_size=14), st.data())  # fmt: skip
def test_spans_are_the_lazy_regex_matches(pair, noise, picks, data):
    start, end = pair
    pieces = [start, end, start[:-1], end[1:], *noise]
    text = "".join(pieces[i % len(pieces)] for i in picks) + data.draw(st.text("ab]<>/", max_size=4))
    regex = re.compile(re.escape(start) + "(.*?)" + re.escape(end), re.DOTALL)
    assert list(spans(text, start, end)) == [m.span() for m in regex.finditer(text)]
    found = regex.search(text)
    assert first_span(text, start, end) == (None if found is None else found.span())


def test_held_extractors_make_no_regex_scan_of_the_whole_text():
    """``functools[`` / ``<function_calls>`` / ``<function`` many times over,
    never closed: each a scan to the end for vLLM's regex, a find here."""
    from derender_queue.core.parsers.minicpm5 import minicpm5_calls
    from derender_queue.core.parsers.olmo3_tools import olmo3_calls
    from derender_queue.core.parsers.phi4_mini import phi4_calls

    for extract, text in [(phi4_calls, "functools[" * LONG), (olmo3_calls, "<function_calls>" * LONG),
                          (lambda t: minicpm5_calls(t, None), "<function " * LONG)]:  # fmt: skip
        calls = c_calls(lambda e=extract, t=text: e(t))
        assert not SCANS & set(calls), calls
        assert calls["str.find"] <= 3, calls


ERNIE_CALL = re.compile(r"<tool_call>[^\S\x1c-\x1f]*(\{.*?\})[^\S\x1c-\x1f]*</tool_call>", re.DOTALL)
ERNIE_PIECES = ["<tool_call>", "</tool_call>", "{", "}", " ", "\n", "\x1c", "\u3000", "x", '"a": 1', "<tool_call", ">"]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(ERNIE_PIECES), max_size=16))
def test_ernie45_call_bodies_are_vllm_regex_matches(parts):
    from derender_queue.core.parsers.ernie45 import call_bodies

    text = "".join(parts)
    assert list(call_bodies(text)) == ERNIE_CALL.findall(text)


def test_ernie45_calls_make_no_regex_scan_and_few_finds():
    """Opened bodies never closed (each a scan to the end for the regex)."""
    from derender_queue.core.parsers.ernie45 import _calls

    for text in ["<tool_call>{" * LONG, "<tool_call>{}</tool_call>" * 10 + "<tool_call>{ } x</tool_call>" * LONG]:
        calls = c_calls(lambda t=text: _calls(t))
        assert not SCANS & set(calls), calls
        assert calls["str.find"] <= 2 * 10 + 4 + (LONG if "x" in text else 0), calls
