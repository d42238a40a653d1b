"""kimi_k3 (vLLM 0.34 ``KimiK3ReasoningParser`` + ``KimiK3ToolParser``,
composed by ``KimiK3Parser``) beyond the recorded fixture
(tests/data/parsers/families/kimi_k3.jsonl.gz): vLLM decides every field on
the whole text, so any chunking folds to the one-shot answer, and a marker
late in the output changes what came before it."""

from __future__ import annotations

import json

import pytest

from derender_queue.core.parsers import ParseRequest, build_parser_factory
from tests.core.test_parsers_deepseek_v3 import one_shot, streamed

OP, CL, SEP = "<|open|>", "<|close|>", "<|sep|>"
TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}, "k": {"type": "integer"}}}}}]
CALL = (f'{OP}tools{SEP}{OP}call tool="search" index="1"{SEP}'
        f'{OP}argument key="query" type="string"{SEP}q{CL}argument{SEP}'
        f'{OP}argument key="k" type="number"{SEP}5{CL}argument{SEP}{CL}call{SEP}{CL}tools{SEP}')
TEXT = f"{OP}think{SEP}plan{CL}think{SEP}{OP}response{SEP}Sure{CL}response{SEP}{CALL}{CL}message{SEP}"


def factory(reasoning: str | None, tools: str | None):
    return build_parser_factory(reasoning, tools, vocab={}, enable_auto_tools=True)


@pytest.mark.parametrize("cuts", [[], [1, 2, 3], list(range(0, len(TEXT), 7)), [len(TEXT) // 2]])
def test_kimi_k3_any_chunking_gives_the_one_shot_answer(cuts):
    f, request = factory("kimi_k3", "kimi_k3"), ParseRequest.from_body({"tools": TOOLS})
    want = ("plan", "Sure", [("search", '{"query": "q", "k": 5}')])
    assert one_shot(f, request, TEXT) == want
    assert streamed(f, request, TEXT, cuts) == want


def test_kimi_k3_later_markers_decide_earlier_text():
    f, request = factory("kimi_k3", "kimi_k3"), ParseRequest.from_body({"tools": TOOLS})
    # The first think open anywhere starts the reasoning; a response block anywhere is the content.
    text = f"a{OP}think{SEP}b{CL}think{SEP}before {CALL} after {OP}response{SEP}late{CL}response{SEP}"
    assert one_shot(f, request, text) == ("b", "late", [("search", '{"query": "q", "k": 5}')])
    assert streamed(f, request, text, [1, 5, 30]) == one_shot(f, request, text)


def test_kimi_k3_reasoning_alone_unwraps_the_response_unless_tools_are_live():
    f = factory("kimi_k3", None)
    plain, with_tools = ParseRequest.from_body({}), ParseRequest.from_body({"tools": TOOLS})
    text = f"plan{CL}think{SEP}{OP}response{SEP}Hi{CL}response{SEP}{CL}message{SEP}"
    assert one_shot(f, plain, text) == ("plan", "Hi", [])
    assert one_shot(f, with_tools, text)[1] == f"{OP}response{SEP}Hi{CL}response{SEP}{CL}message{SEP}"
    off = ParseRequest.from_body({"chat_template_kwargs": {"thinking": False}})
    assert one_shot(f, off, text) == (None, "Hi", [])  # thinking off: the response body, the plan dropped
    assert one_shot(f, off, f"plan{CL}think{SEP}Hi")[1] == f"plan{CL}think{SEP}Hi"


def test_kimi_k3_reasoning_with_another_tool_parser_takes_its_content():
    # KimiK3Parser._extract_tool_calls: the tool parser's content even with
    # tool_choice "none"; a legacy one answers "" where the content was None.
    request = ParseRequest.from_body({})
    assert one_shot(factory("kimi_k3", "hermes"), request, "still thinking") == ("still thinking", "", [])
    assert one_shot(factory("kimi_k3", None), request, "still thinking") == ("still thinking", None, [])


def test_kimi_k3_reasoning_streams_once_its_open_came_and_the_state_stays_small():
    # The first think open decides where the reasoning starts; until its close
    # nothing else can change it, so it streams and the state keeps a partial close at most.
    f, request = factory("kimi_k3", "kimi_k3"), ParseRequest.from_body({"tools": TOOLS})
    parser, sizes, sent = f(request), [], ""
    for piece in ["x", OP, "think", SEP, *["step <|close|>response<|sep|> " for _ in range(400)], CL, " think "]:
        sent += parser.feed(piece).reasoning or ""
        parser = f(request, state=json.loads(json.dumps(parser.to_state())))
        sizes.append(len(json.dumps(parser.to_state())))
    assert sent == "step <|close|>response<|sep|> " * 400
    assert max(sizes) < 400
    rest = f"{SEP}{OP}response{SEP}Sure{CL}response{SEP}{CALL}{CL}message{SEP}"
    parser.feed(rest)
    assert parser.finish().tool_calls


@pytest.mark.parametrize("text", [
    f"{OP} think {SEP}plan{CL} think\n{SEP}{OP}response{SEP}Hi{CL}response{SEP}",
    f"a{CL}think{SEP}b{OP}think{SEP}plan{CL}thin{CL}think{SEP}c",
    f"{OP}think{SEP}plan{CL}thinker{SEP}{CL}think",
    f"{OP}respo{OP}think{SEP}plan", f"{OP}{OP}think{SEP}p{CL}{CL}think{SEP}c", TEXT,
])
@pytest.mark.parametrize("tools", ["kimi_k3", None])
def test_kimi_k3_streamed_reasoning_splits_as_the_one_shot_parse(text, tools):
    f = factory("kimi_k3", tools)
    for request in (ParseRequest.from_body({"tools": TOOLS}), ParseRequest.from_body({})):
        whole = one_shot(f, request, text)
        for step in (1, 2, 3, 5):
            assert streamed(f, request, text, list(range(step, len(text), step))) == whole, (text, step)


def test_kimi_k3_response_body_streams_up_to_its_first_marker_and_the_state_stays_small():
    # A response open before any other XTML marker: every answer's content starts with its body up to the first "<|".
    f, request = factory("kimi_k3", "kimi_k3"), ParseRequest.from_body({"tools": TOOLS})
    parser, sizes, sent = f(request), [], ""
    pieces = [OP, "think", SEP, "plan", CL, "think", SEP, OP, "response", SEP, "  ", *["word " for _ in range(800)]]
    for piece in pieces:
        sent += parser.feed(piece).content or ""
        parser = f(request, state=json.loads(json.dumps(parser.to_state())))
        sizes.append(len(json.dumps(parser.to_state())))
    assert sent == "  " + "word " * 800 and max(sizes) < 400
    assert not parser.feed(f"{CL}response{SEP}{CALL}{CL}message{SEP}").content
    last = parser.finish()
    assert not last.content and last.tool_calls


@pytest.mark.parametrize("text", [
    f"{OP}response{SEP}  {CL}response{SEP}{CALL}",  # a blank body beside a call: None
    f"{OP}response{SEP}Hi {CL}message{SEP} there{CL}response{SEP}{CALL}",  # a complete block keeps the message close
    f"{OP}response{SEP}Hi {CL}message{SEP} there{CALL}",  # an open one loses it and ends at the tools
    f"{OP}response{SEP}Hi {CALL} more {CL}response{SEP}",  # the block runs over the tools
    f"pre {OP}response{SEP}Hi{CL}response{SEP}", f"{CALL}{OP}response{SEP}late", f"{OP} response {SEP}Hi <| x",
    f"{CL}response{SEP}x{OP}response{SEP}Hi",
])
@pytest.mark.parametrize("reasoning", [None, "kimi_k3"])
def test_kimi_k3_streamed_response_body_gives_the_one_shot_content(text, reasoning):
    f = factory(reasoning, "kimi_k3")
    text = (f"plan{CL}think{SEP}" if reasoning else "") + text
    none = ParseRequest.from_body({"tools": TOOLS, "tool_choice": "none"})
    for request in (ParseRequest.from_body({"tools": TOOLS}), none):
        whole = one_shot(f, request, text)
        for step in (1, 2, 3, 7):
            assert streamed(f, request, text, list(range(step, len(text), step))) == whole, (text, step)
