"""The tool parsers that decide at the end (``held_tools.py``: ``granite4``,
``internlm``, ``jamba``, ``xlam``, ``olmo3``, ``lfm2``, ``apertus``, ``dots``,
``minicpm5``): any chunking, with the parser rebuilt from its JSON state at every boundary,
folds to the one-shot answer (their fixtures check that answer against vLLM
0.34; ``lfm2``, ``apertus`` and ``dots`` stream the leading whitespace that
their answer strips when a call follows, docs/parsers.md "held content");
the state holds only the undecided tail; and the documented difference:
``internlm`` answers what vLLM fails on (HTTP 500) with the output as content.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from derender_queue.core.parsers import ParseRequest, build_parser_factory
from derender_queue.core.parsers.apertus import complete_partial
from tests.core.test_parser_engine import one_shot, streamed

VOCAB = {"<think>": 128821, "</think>": 128822}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]
NAMES = ["granite4", "internlm", "jamba", "xlam", "olmo3", "lfm2", "apertus", "dots", "minicpm5"]
STRIPPED = {"lfm2", "apertus", "dots"}
FACTORIES = {name: build_parser_factory(None, name, vocab=VOCAB, enable_auto_tools=True) for name in NAMES}
REQUESTS = [{"tools": TOOLS}, {"tools": TOOLS, "tool_choice": "required"}, {"tools": TOOLS, "tool_choice": "none"},
            {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}, {}]
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
FRAGMENTS = ["<tool_call>", "</tool_call>", CALL, "<|action_start|><|plugin|>", "<|action_end|>", "<tool_calls>",
             "</tool_calls>", f"[{CALL}]", "```json\n", "```", "<function_calls>", "</function_calls>",
             'get_weather(city="Paris")', "\n", " ", "x", "杭州", "<|tool_call_start|>", "<|tool_call_end|>",
             '[get_weather(city="Paris", days=07)]', "<|tools_prefix|>", "<|tools_suffix|>",
             '[{"get_weather": {"city": "Par', "<dots_function_call>", "</dots_function_call>",
             '<invoke name="get_weather"><parameter name="days">3</parameter></invoke>', "{bad",
             '<function name="get_weather">', '<param name="city">Paris</param>', "</function>"]  # fmt: skip


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.sampled_from(FRAGMENTS), max_size=10), data=st.data(),
       name=st.sampled_from(NAMES), req=st.integers(0, len(REQUESTS) - 1))
def test_any_chunking_and_state_round_trip_equal_one_shot(parts, data, name, req):
    text = "".join(parts)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    factory, request = FACTORIES[name], ParseRequest.from_body(REQUESTS[req])
    got, want = streamed(factory, request, text, cuts, None), one_shot(factory, request, text, None)
    if name in STRIPPED and got != want and got[2] == want[2] and isinstance(got[1], str):
        assert got[1][:1].isspace() and got[1].lstrip() == (want[1] or "")  # the held-content exception
    else:
        assert got == want


def test_content_before_the_marker_streams_and_the_state_holds_the_tail():
    for name, marker in [("granite4", "<tool_call>"), ("jamba", "<tool_calls>"), ("lfm2", "<|tool_call_start|>"),
                         ("dots", "<dots_function_call>")]:  # fmt: skip
        parser = FACTORIES[name](ParseRequest.from_body({"tools": TOOLS}))
        assert parser.feed("word " * 300).content == ("word " * 300).rstrip(" " if name in STRIPPED else "")
        assert len(json.dumps(parser.to_state())) < 300
        parser.feed(marker + CALL)
        assert parser.to_state()["t"]["tail"] == marker + CALL
    parser = FACTORIES["xlam"](ParseRequest.from_body({"tools": TOOLS}))
    assert parser.feed("word").content is None  # xlam and olmo3 hold the whole output


def test_internlm_answers_what_vllm_fails_on_with_the_output_as_content():
    factory, request = FACTORIES["internlm"], ParseRequest.from_body({"tools": TOOLS})
    call = "<|action_start|><|plugin|>" + CALL + "<|action_end|>"
    assert one_shot(factory, request, "Hi" + call, None) == (None, "Hi", [("get_weather", '{"city": "Paris"}')])
    for text in ["Hi" + call + call, "Hi<|action_start|><|plugin|>{bad", "<|action_start|><|plugin|>{}"]:
        assert one_shot(factory, request, text, None) == (None, text, [])


def test_apertus_completes_partial_json_as_partial_json_parser_does():
    assert complete_partial('[{"get_weather": {"city": "Par') == [{"get_weather": {"city": "Par"}}]
    assert complete_partial('[{"a": 1}, {"b":') == [{"a": 1}, {}]
    assert complete_partial('{"k": "v\\u00') == {"k": "v"}
    assert complete_partial("[1, 2, ") == [1, 2]
    for bad in ["", "{bad", "[1 2]", "-"]:
        try:
            complete_partial(bad)
        except ValueError:
            continue
        raise AssertionError(bad)
