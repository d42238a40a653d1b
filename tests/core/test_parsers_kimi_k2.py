"""The kimi_k2 parsers beyond the recorded fixture (tests/data/parsers/
families/kimi_k2.jsonl.gz, checked by test_parser_families.py):

* any chunking, with the parser rebuilt from its JSON state at every cut,
  folds to the one-shot answer;
* the name rules KimiK2Parser overrides in code: ``functions.NAME:N``
  headers, the fallback to a ``"name"`` in the arguments or to the raw
  header, and raw (stripped) arguments;
* thinking off: the output is content as it is, ``</think>`` included.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from derender_queue.core.parsers import ParseRequest, build_parser_factory
from tests.core.test_parsers_deepseek_v3 import one_shot, same_answer, streamed

VOCAB = {"<think>": 128821, "</think>": 128822}
SPECIAL = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<|im_end|>"]
TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}, "k": {"type": "integer"}}}}}]
PAIRS = [("kimi_k2", "kimi_k2"), (None, "kimi_k2"), ("kimi_k2", None), ("deepseek_r1", "kimi_k2")]
FACTORIES = [build_parser_factory(r, t, vocab=VOCAB, enable_auto_tools=True, special_tokens=SPECIAL) for r, t in PAIRS]
REQUESTS = [{}, {"tools": TOOLS}, {"tools": TOOLS, "chat_template_kwargs": {"thinking": False}},
            {"tools": TOOLS, "tool_choice": "required"}, {"tools": TOOLS, "parallel_tool_calls": False}]  # fmt: skip
S, SE, C, A, E = ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                  "<|tool_call_argument_begin|>", "<|tool_call_end|>")  # fmt: skip
FRAGMENTS = ["<think>", "</think>", S, SE, C, A, E, "functions.search:0", "search", ":1", '{"query": "q", "k": "2"}',
             '{"name": "search"}', " ", "\n", "x", "杭州", "😀", "<|im_end|>",
             f'{S}{C}functions.search:0{A}{{"query": "q"}}{E}{SE}']  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.sampled_from(FRAGMENTS), max_size=12), data=st.data(),
       which=st.integers(0, len(PAIRS) - 1), req=st.integers(0, len(REQUESTS) - 1))  # fmt: skip
def test_any_chunking_and_state_round_trip_equal_one_shot(parts, data, which, req):
    text = "".join(parts)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    factory, request = FACTORIES[which], ParseRequest.from_body(REQUESTS[req])
    assert same_answer(streamed(factory, request, text, cuts), one_shot(factory, request, text))


def test_kimi_names_and_arguments():
    request = ParseRequest.from_body({"tools": TOOLS})
    text = (f"plan</think>Sure {S}{C}functions.search:0{A} {{\"k\": \"2\"}} {E}{C}bad{A}{{\"name\": \"run\"}}{E}"
            f"{C}raw{A}{E}{SE} dropped")
    want = ("plan", "Sure ", [("search", '{"k": 2}'), ("run", '{"name": "run"}'), ("raw", "{}")])
    assert one_shot(FACTORIES[0], request, text) == want
    assert streamed(FACTORIES[0], request, text, [14, 40, 41, 80]) == want


def test_thinking_off_gives_the_output_as_content():
    request = ParseRequest.from_body({"tools": TOOLS, "chat_template_kwargs": {"thinking": False}})
    text = f"a</think>b{S}{C}functions.search:0{A}{{}}{E}{SE}"
    assert one_shot(FACTORIES[0], request, text) == (None, "a</think>b", [("search", "{}")])
