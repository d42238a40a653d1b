"""Cohere Command 3 / 4 (``parsers/cohere.py``): melody's filter as vLLM 0.34's
``CohereCommandParser`` runs it (``process_full_text``), written here; any
chunking, each chunk resumed from the JSON state, gives the one-shot answer.
The answers below are cohere_melody 0.15.3's (checked in the reference
virtualenv); ``tests/data/parsers/families/cohere.jsonl.gz`` holds vLLM's."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from derender_queue.core.parsers import build_parser_factory, parse_message
from derender_queue.core.parsers.cohere_filter import MARKERS
from derender_queue.core.parsers.request import ParseRequest
from tests.core.test_parsers_deepseek_v3 import streamed

VOCAB = {marker: 129280 + i for i, marker in enumerate(MARKERS["cohere_command4"])}
TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}}}}]
CALL = '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "search", "parameters": {"q": "a"}}\n]<|END_ACTION|>'


def factory(reasoning, tools):
    return build_parser_factory(reasoning, tools, vocab=VOCAB, enable_auto_tools=True)


def one_shot(f, request, text):
    msg = parse_message(f, replace(request, prompt_token_ids=None), text, [], "stop")
    return msg.reasoning, msg.content, [(c["function"]["name"], c["function"]["arguments"]) for c in msg.tool_calls]


@pytest.mark.parametrize(("names", "text", "want"), [
    (("cohere_command3", "cohere_command3"), "<|START_THINKING|> plan <|END_THINKING|><|START_RESPONSE|>Hi <co>x"
     "</co: 0:[1]>!  <|END_RESPONSE|>", ("plan", "Hi x!", [])),
    (("cohere_command3", "cohere_command3"), "<|START_THINKING|>I will look.<|END_THINKING|>" + CALL,
     ("I will look.", None, [("search", '{"q": "a"}')])),
    (("cohere_command4", None), "plan<|END_THINKING|><|START_TEXT|>Hi<|END_TEXT|> dropped", ("plan", "Hi", [])),
    (("cohere_command4", "cohere_command4"), "plan", ("plan", None, [])),  # Command 4 starts in reasoning
    ((None, "cohere_command3"), 'Hi<|START_ACTION|>[{"tool_name": "search", "parameters": {}}]',
     (None, "Hi", [])),  # no tool_call_id: no call
    ((None, "cohere_command3"), '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "search", "parameters": '
     '{"q": "a\\', (None, None, [])),  # an action ending in a backslash is skipped
    (("cohere_command3", "cohere_command3"), "<|START_RESPONSE|>Half <co>open", (None, "Half open", [])),
    (("cohere_command3", "cohere_command3"), "<|START_RESPONSE|><co></co: 0:[1]><|END_RESPONSE|>", (None, None, [])),
])  # fmt: skip
def test_cohere_any_chunking_equals_one_shot(names, text, want):
    f = factory(*names)
    request = ParseRequest.from_body({"tools": TOOLS})
    assert one_shot(f, request, text) == want
    for step in (1, 2, 3, 7):
        assert streamed(f, request, text, list(range(0, len(text), step))) == want


FRAGMENTS = [*MARKERS["cohere_command4"], "<co>", "</co: 0:[1]>", "<co", "<", ">", "x", " ", "\n", "日本", "\\", '"',
             "{", "}", '"tool_call_id": "0", ', '"tool_name": "search", ', '"parameters": {"q": "a"}',
             '"parameters": 5', "[", "]"]  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.sampled_from(FRAGMENTS), max_size=16), data=st.data(),
       names=st.sampled_from([("cohere_command3", "cohere_command3"), ("cohere_command4", None),
                              (None, "cohere_command4")]))  # fmt: skip
def test_cohere_random_chunking_and_state_round_trip(parts, data, names):
    f = factory(*names)
    request = ParseRequest.from_body({"tools": TOOLS})
    text = "".join(parts)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    assert streamed(f, request, text, cuts) == one_shot(f, request, text)


def test_cohere_tool_parser_needs_a_cohere_reasoning_parser():
    """vLLM's ``CohereCommandParser`` asserts its shim (the reasoning parser
    when there is one) is Cohere's."""
    with pytest.raises(ValueError, match="Cohere Command reasoning parser"):
        factory("deepseek_r1", "cohere_command3")


def test_cohere_streams_a_block_up_to_its_first_angle_bracket():
    """An answer streams before its end marker: melody's text for the block
    starts with what precedes its first ``<`` (trailing blanks held)."""
    f = factory("cohere_command3", "cohere_command3")
    request = ParseRequest.from_body({})
    parser = f(request)
    first = parser.feed("<|START_THINKING|> plan <|END_THINKING|><|START_RESPONSE|>The sky ")
    assert (first.reasoning, first.content) == ("plan", "The sky")
    second = parser.feed("is <co>blue")
    assert (second.reasoning, second.content) == (None, " is")
    rest = parser.feed("</co: 0:[1]>.<|END_RESPONSE|>")
    assert rest.content == " blue."


@pytest.mark.parametrize("before_upgrade", [
    {"h": {"held": "  "}},  # held whitespace, nothing sent: "to" was 0, now it would be the held text's end
    {"h": {"held": "The sky", "sent_early": 7, "to": 7}},
])  # fmt: skip
def test_a_cohere_state_issued_before_ws_is_refused_not_misread(before_upgrade):
    """Where the text sent early ends moved from counts (to, sent_early) to the
    whitespace withheld after it (ws): a state of the earlier shape, the
    whitespace-only one included, is a 400 naming another shape."""
    from derender_queue.core.stream_state import expand
    from derender_queue.errors import DerenderError

    ref = factory("cohere_command3", "cohere_command3")(ParseRequest.from_body({})).to_state()
    with pytest.raises(DerenderError) as refused:
        expand(before_upgrade, ref)
    assert refused.value.status == 400 and "another shape" in refused.value.body().decode()
