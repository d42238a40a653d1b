"""The k2_horizon parsers beyond the recorded fixture (tests/data/parsers/
families/k2_horizon.jsonl.gz, checked by test_parser_families.py):

* any chunking, with the parser rebuilt from its JSON state at every cut,
  folds to the one-shot answer;
* the group rule: only the first closed ``<ifm|tool_calls>`` group counts,
  all its calls or none; the content around it streams;
* reasoning without its end tag ends at the group, else is no reasoning.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from derender_queue.core.parsers import ParseRequest, build_parser_factory
from tests.core.test_parsers_deepseek_v3 import one_shot, same_answer, state_bytes, streamed

VOCAB = {"<think>": 128821, "</think>": 128822}
SPECIAL = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"]
TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}, "k": {"type": "integer"}}}}}]
PAIRS = [("k2_horizon", "k2_horizon"), (None, "k2_horizon"), ("k2_horizon", None), ("deepseek_r1", "k2_horizon")]
FACTORIES = [build_parser_factory(r, t, vocab=VOCAB, enable_auto_tools=True, special_tokens=SPECIAL) for r, t in PAIRS]
REQUESTS = [{}, {"tools": TOOLS}, {"tools": TOOLS, "tool_choice": "none"},
            {"tools": TOOLS, "chat_template_kwargs": {"tool_call_format": "json"}},
            {"tools": TOOLS, "tool_choice": "required"}, {"tools": TOOLS, "parallel_tool_calls": False}]  # fmt: skip
G, GE, C, CE, K, KE, V, VE = ("<ifm|tool_calls>", "</ifm|tool_calls>", "<ifm|tool_call>", "</ifm|tool_call>",
                              "<ifm|arg_key>", "</ifm|arg_key>", "<ifm|arg_value>", "</ifm|arg_value>")  # fmt: skip
CALL = f"{C}search{K}query{KE}{V}q{VE}{K}k{KE}{V}2{VE}{CE}"
FRAGMENTS = ["<ifm|think>", "</ifm|think>", G, GE, C, CE, K, KE, V, VE, "search", "query", "k", "2", " ", "\n",
             "x", "杭州", "😀", CALL, f'{C}{{"name": "search", "arguments": {{"k": 1}}}}{CE}']  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.sampled_from(FRAGMENTS), max_size=12), data=st.data(),
       which=st.integers(0, len(PAIRS) - 1), req=st.integers(0, len(REQUESTS) - 1))  # fmt: skip
def test_any_chunking_and_state_round_trip_equal_one_shot(parts, data, which, req):
    text = "".join(parts)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    factory, request = FACTORIES[which], ParseRequest.from_body(REQUESTS[req])
    assert same_answer(streamed(factory, request, text, cuts), one_shot(factory, request, text))


def test_the_first_closed_group_decides():
    request = ParseRequest.from_body({"tools": TOOLS})
    text = f"plan</ifm|think>Sure {G}{CALL}{GE} after {G}{CALL}{GE}"
    want = ("plan", f"Sure  after {G}{CALL}{GE}", [("search", '{"query": "q", "k": 2}')])
    assert one_shot(FACTORIES[0], request, text) == want
    assert streamed(FACTORIES[0], request, text, [5, 30, 70]) == want
    bad = f"plan</ifm|think>Sure {G}{CALL} junk {GE}"
    assert one_shot(FACTORIES[0], request, bad) == ("plan", f"Sure {G}{CALL} junk {GE}", [])


def test_reasoning_without_its_end_tag():
    request = ParseRequest.from_body({"tools": TOOLS})
    assert one_shot(FACTORIES[2], request, "<ifm|think>just thinking") == ("", "just thinking", [])
    assert one_shot(FACTORIES[2], request, f"thinking {G}x") == ("thinking ", f"{G}x", [])
    # Content after the end tag streams; before it, reasoning waits for the tag (vLLM decides at the end).
    assert state_bytes(FACTORIES[2], request, "plan</ifm|think>" + "word " * 1000) < 200
