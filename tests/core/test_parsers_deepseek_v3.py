"""The DeepSeek V3 group's parsers (deepseek_v3, deepseek_v31, deepseek_v32,
deepseek_v41) beyond the recorded fixture (tests/data/parsers/families/
deepseek_v3.jsonl.gz, checked by test_parser_families.py):

* any chunking, with the parser rebuilt from its JSON state at every cut,
  folds to the one-shot answer, for random outputs built from the group's
  markup (the legacy ``deepseek_v3``/``deepseek_v31`` stages included);
* what the legacy stages hold: nothing but a partial marker while no call
  section started, the section (and V3's text after it) once one did;
* vLLM's rules that decide on the whole text: a V3 call whose type is not
  ``function`` turns every call back into content; V3 keeps the text after
  the last section end, V3.1 drops it.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from derender_queue.core.parsers import DeltaAccumulator, ParseRequest, build_parser_factory, parse_message
from derender_queue.core.stream_state import compact

VOCAB = {"<think>": 128821, "</think>": 128822, "<｜User｜>": 128803, "<｜Assistant｜>": 128804,
         "<｜tool▁calls▁begin｜>": 128806, "<｜tool▁calls▁end｜>": 128807}  # fmt: skip
SPECIAL = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"]
TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}, "k": {"type": "integer"}}}}}]
PAIRS = [("deepseek_v41", "deepseek_v41"), (None, "deepseek_v32"), ("deepseek_v3", "deepseek_v3"),
         ("deepseek_v3", "deepseek_v31"), (None, "deepseek_v3"), ("deepseek_r1", "deepseek_v41")]  # fmt: skip
FACTORIES = [build_parser_factory(r, t, vocab=VOCAB, enable_auto_tools=True, special_tokens=SPECIAL) for r, t in PAIRS]
REQUESTS = [{}, {"tools": TOOLS}, {"tools": TOOLS, "chat_template_kwargs": {"thinking": True}},
            {"tools": TOOLS, "chat_template_kwargs": {"thinking": False}}, {"tools": TOOLS, "tool_choice": "required"},
            {"tools": TOOLS, "parallel_tool_calls": False}]  # fmt: skip
CB, CE, C, E, SEP = ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
                     "<｜tool▁sep｜>")  # fmt: skip
V3_CALL = f'{C}function{SEP}search\n```json\n{{"query": "q"}}\n```{E}'
V41_CALL = ('<｜DSML｜ calls>\n<｜DSML｜ invoke name="search">\n<｜DSML｜ parameter name="query" string="true">q'
            "</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>")
FRAGMENTS = ["<think>", "</think>", CB, CE, C, E, SEP, "function", "search", "\n```json\n", "\n```", '{"query": "q"}',
             " ", "\n", "x", "杭州", "😀", "<｜DSML｜ calls>", "</｜DSML｜ calls>", '<｜DSML｜ invoke name="', '">',
             "</｜DSML｜ invoke>", '<｜DSML｜ parameter name="query" string="true">', "</｜DSML｜ parameter>",
             "<｜DSML｜function_calls>", '<｜DSML｜invoke name="', "<｜end▁of▁sentence｜>", V3_CALL, V41_CALL,
             f"{C}search{SEP}{{}}{E}"]  # fmt: skip


def fold(deltas) -> tuple:
    acc = DeltaAccumulator()
    for d in deltas:
        acc.add(d)
    return acc.reasoning, acc.content, [(c["function"]["name"], c["function"]["arguments"]) for c in acc.tool_calls]


def streamed(factory, request, text: str, cuts: list[int]) -> tuple:
    state, deltas, last = None, [], 0
    for cut in [*sorted(set(cuts)), len(text)]:
        parser = factory(request, state=None if state is None else json.loads(json.dumps(state)))
        deltas.append(parser.feed(text[last:cut]))
        state, last = parser.to_state(), cut
    deltas.append(factory(request, state=json.loads(json.dumps(state))).finish())
    return fold(deltas)


def one_shot(factory, request, text: str) -> tuple:
    msg = parse_message(factory, request, text, [], "stop")
    return msg.reasoning, msg.content, [(c["function"]["name"], c["function"]["arguments"]) for c in msg.tool_calls]


def same_answer(stream: tuple, whole: tuple) -> bool:
    """Equal, or but for the leading whitespace an engine stream sends before
    a call (docs/parsers.md, "held content")."""
    if stream == whole:
        return True
    (reasoning, content, calls), (w_reasoning, w_content, w_calls) = stream, whole
    return ((reasoning, calls) == (w_reasoning, w_calls) and isinstance(content, str) and content[:1].isspace()
            and content.lstrip() == (w_content or ""))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.sampled_from(FRAGMENTS), max_size=12), data=st.data(),
       which=st.integers(0, len(PAIRS) - 1), req=st.integers(0, len(REQUESTS) - 1))  # fmt: skip
def test_any_chunking_and_state_round_trip_equal_one_shot(parts, data, which, req):
    text = "".join(parts)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    factory, request = FACTORIES[which], ParseRequest.from_body(REQUESTS[req])
    assert same_answer(streamed(factory, request, text, cuts), one_shot(factory, request, text))


def state_bytes(factory, request, text: str) -> int:
    parser = factory(request)
    parser.feed(text)
    return len(json.dumps(compact(parser.to_state(), factory(request).to_state()), ensure_ascii=False))


def test_legacy_stages_hold_only_the_call_section():
    v3 = FACTORIES[2]
    request = ParseRequest.from_body({"tools": TOOLS})
    answer = "word " * 2000
    assert state_bytes(v3, request, answer) < 150  # content streams; only a marker-sized look-behind is kept
    assert state_bytes(v3, request, answer + CB + V3_CALL) < 300  # the section so far
    parser = v3(request)
    assert parser.feed(answer + CB[:5]).content == answer  # a partial section marker waits


def test_a_v3_call_of_another_type_turns_every_call_into_content():
    request = ParseRequest.from_body({"tools": TOOLS})
    bad = V3_CALL.replace("function", "func")
    text = f"Sure {CB}{V3_CALL}{bad}{CE}"
    assert one_shot(FACTORIES[4], request, text) == (None, text, [])
    assert streamed(FACTORIES[4], request, text, [3, 30, 90]) == (None, text, [])


def test_v3_keeps_the_text_after_the_last_section_end_and_v31_drops_it():
    request = ParseRequest.from_body({"tools": TOOLS})
    v3_text = f"a{CB}{V3_CALL}{CE}b{CE}c"
    assert one_shot(FACTORIES[4], request, v3_text) == (None, "ac", [("search", '{"query": "q"}')])
    v31 = build_parser_factory(None, "deepseek_v31", vocab=VOCAB, enable_auto_tools=True, special_tokens=SPECIAL)
    v31_text = f"a{CB}{C}search{SEP}{{}}{E}{CE}b"
    assert one_shot(v31, request, v31_text) == (None, "a", [("search", "{}")])
    # A blank content with a section is None, without one it stays as it is.
    assert one_shot(v31, request, f"  {CB}{CE}") == (None, None, [])
    assert one_shot(v31, request, "  ") == (None, "  ", [])
