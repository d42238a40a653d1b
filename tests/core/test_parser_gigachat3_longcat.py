"""The hand-written ``gigachat3`` and ``longcat`` tool stages keep the
engine's promise: any chunking, with the parser rebuilt from its JSON state
at every boundary, folds to the one-shot answer (their fixtures check that
answer against vLLM 0.34); and their state holds only what is undecided.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from derender_queue.core.parsers import ParseRequest, build_parser_factory
from tests.core.test_parser_engine import one_shot, streamed

VOCAB = {"<think>": 128821, "</think>": 128822}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
FACTORIES = [build_parser_factory(r, t, vocab=VOCAB, enable_auto_tools=True)
             for r, t in [(None, "gigachat3"), ("deepseek_r1", "gigachat3"), (None, "longcat"), ("qwen3", "longcat")]]
REQUESTS = [{"tools": TOOLS}, {"tools": TOOLS, "tool_choice": "required"}, {"tools": TOOLS, "tool_choice": "none"},
            {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}, {}]
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
FRAGMENTS = ["<|message_sep|>", "function call<|role_sep|>\n", "<|function_call|>", "<|role_sep|>", "function call",
             CALL, '{"name": "a"', ', "arguments": {}}', "</s>", " ", "\n", "x", "杭州", "</think>", "<think>",
             "<longcat_tool_call>", "</longcat_tool_call>", "<tool_call>", '[{"name": "a", "parameters": {}}]',
             "<longcat_tool_call>" + CALL + "</longcat_tool_call>"]  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.sampled_from(FRAGMENTS), max_size=12), data=st.data(),
       which=st.integers(0, len(FACTORIES) - 1), req=st.integers(0, len(REQUESTS) - 1))
def test_any_chunking_and_state_round_trip_equal_one_shot(parts, data, which, req):
    text = "".join(parts)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    factory, request = FACTORIES[which], ParseRequest.from_body(REQUESTS[req])
    assert streamed(factory, request, text, cuts, None) == one_shot(factory, request, text, None)


def test_gigachat3_streams_content_and_holds_only_the_call():
    factory, request = FACTORIES[0], ParseRequest.from_body({"tools": TOOLS})
    parser = factory(request)
    assert parser.feed("word " * 300).content == "word " * 300
    assert len(json.dumps(parser.to_state())) < 300
    parser.feed("<|message_sep|>function call<|role_sep|>\n" + CALL[:20])
    assert one_shot(factory, request, "Hi<|message_sep|>function call<|role_sep|>\n" + CALL + "</s>", None) == (
        None, "Hi", [("get_weather", '{"city": "Paris"}')])
    assert one_shot(factory, request, "Hi<|function_call|>{bad", None) == (None, "Hi<|function_call|>{bad", [])
    # A marker's first letters at the end are content (the fixture caught their loss).
    assert one_shot(factory, request, "  \nf", None) == (None, "  \nf", [])
