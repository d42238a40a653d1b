"""The parser engine's own promises (derender_queue/core/parsers/engine).

* Chunking and state round-trips never change a result: for random outputs
  built from a family's markup fragments, folding the deltas of any chunking,
  with the parser rebuilt from ``json.loads(json.dumps(to_state()))`` at
  every boundary, equals the one-shot ``parse_message`` (but for the one
  documented exception, ``same_answer``).
* The lexer gives one feed's tokens for any chunking, also when one literal is
  a prefix of another, and refuses literals it could not hold back for.
* A grammar whose call text could change after the engine sent it is refused.
* Forced calls a tool parser leaves to vLLM's serving layer (forced.py):
  a named call's arguments stream, a required list is read as vLLM reads it.
* The ``swap_blank_content`` hook (nemotron_v3): any chunking folds to the
  one-shot swap, which reads the request's own kwargs, not the defaults.
* The state stays small while nothing is undecided (quoted in bytes), also
  for content that starts with whitespace while a call may still follow: it
  is streamed, and only its leading whitespace differs from the non-streaming
  answer when a call follows (docs/parsers.md, "held content").
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from derender_queue.core.parsers import (
    DeltaAccumulator,
    ParsedDelta,
    ParseRequest,
    build_parser_factory,
    parse_message,
)
from derender_queue.core.parsers.engine import EngineReasoning
from derender_queue.core.parsers.engine.family import Family
from derender_queue.core.parsers.engine.grammar import Event, Grammar, State, Transition
from derender_queue.core.parsers.factory import ParserFactory
from derender_queue.core.parsers.families.qwen3 import QWEN3
from derender_queue.core.parsers.forced import ForcedToolStage, function_definitions
from derender_queue.core.parsers.lexer import LiteralLexer
from derender_queue.core.parsers.pipeline import Engines, ParserSpec
from derender_queue.core.stream_state import compact

VOCAB = {"<think>": 128821, "</think>": 128822, "<tool_call>": 129280, "</tool_call>": 129281,
         "<|im_start|>": 129282, "<|im_end|>": 129283}  # fmt: skip
SPECIAL = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<|im_start|>", "<|im_end|>", "<|endoftext|>"]
TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}, "k": {"type": "integer"}}}}}]
PAIRS = [("qwen3", "qwen3_coder"), ("qwen3", "hermes"), ("qwen3", None), (None, "qwen3_xml"),
         ("deepseek_r1", "qwen3_coder")]  # fmt: skip
FACTORIES = [build_parser_factory(r, t, vocab=VOCAB, enable_auto_tools=True, special_tokens=SPECIAL) for r, t in PAIRS]
REQUESTS = [{}, {"tools": TOOLS}, {"tools": TOOLS, "tool_choice": "none"}, {"tools": TOOLS, "tool_choice": "required"},
            {"tools": TOOLS, "parallel_tool_calls": False}, {"tools": TOOLS, "include_reasoning": False},
            {"tools": TOOLS, "chat_template_kwargs": {"enable_thinking": False}}]  # fmt: skip
FRAGMENTS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=",
             "</parameter>", ">", "\n", " ", "search", "query", "k", "5", "x", "<|im_end|>", "<|endoftext|>",
             '{"name": "search", "arguments": {"query": "q"}}', '"name": "search"', "<", "/", "=", "杭州", "😀",
             "<tool_call>\n<function=search>\n<parameter=query>\nq\n</parameter>\n</function>\n</tool_call>",
             ]  # fmt: skip


def fold(deltas) -> tuple:
    acc = DeltaAccumulator()
    for d in deltas:
        acc.add(d)
    calls = [(c["function"]["name"], c["function"]["arguments"]) for c in acc.tool_calls]
    return acc.reasoning, acc.content, calls


def streamed(factory, request, text: str, cuts: list[int], prompt: list[int] | None) -> tuple:
    """Feed text cut at `cuts`, rebuilding the parser from its JSON state each time."""
    state = factory.start_state(request, prompt)
    deltas, last = [], 0
    for cut in [*sorted(set(cuts)), len(text)]:
        parser = factory(request, state=None if state is None else json.loads(json.dumps(state)))
        deltas.append(parser.feed(text[last:cut]))
        state, last = parser.to_state(), cut
    deltas.append(factory(request, state=json.loads(json.dumps(state))).finish())
    return fold(deltas)


def same_answer(stream: tuple, whole: tuple) -> bool:
    """Equal, or equal but for the leading whitespace a stream sends before
    a call that the non-streaming answer then strips (docs/parsers.md)."""
    if stream == whole:
        return True
    (reasoning, content, calls), (w_reasoning, w_content, w_calls) = stream, whole
    return ((reasoning, calls) == (w_reasoning, w_calls) and isinstance(content, str) and content[:1].isspace()
            and content.lstrip() == (w_content or ""))


def one_shot(factory, request, text: str, prompt: list[int] | None) -> tuple:
    msg = parse_message(factory, ParseRequest(**{**request.__dict__, "prompt_token_ids": prompt}), text, [], "stop")
    return msg.reasoning, msg.content, [(c["function"]["name"], c["function"]["arguments"]) for c in msg.tool_calls]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(st.sampled_from(FRAGMENTS), max_size=14),
    data=st.data(),
    which=st.integers(0, len(PAIRS) - 1),
    req=st.integers(0, len(REQUESTS) - 1),
    prompt=st.sampled_from([None, [129282, 5], [129282, 5, 128821], [128821, 128822, 5]]),
)
def test_any_chunking_and_state_round_trip_equal_one_shot(parts, data, which, req, prompt):
    text = "".join(parts)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    factory, request = FACTORIES[which], ParseRequest.from_body(REQUESTS[req])
    assert same_answer(streamed(factory, request, text, cuts, prompt), one_shot(factory, request, text, prompt))


def test_char_by_char_sweep():
    text = ("plan</think>\n\nSure <tool_call>\n<function=search>\n<parameter=query>\n杭州 😀\n</parameter>\n"
            "<parameter=k>\n5\n</parameter>\n</function>\n</tool_call> tail")
    for factory in FACTORIES:
        for body in REQUESTS:
            request = ParseRequest.from_body(body)
            assert same_answer(streamed(factory, request, text, list(range(len(text))), None),
                               one_shot(factory, request, text, None))


@given(st.lists(st.sampled_from(["<a", "<ab", "<abc>", "b", "c", ">", "x"]), max_size=12), st.data())
def test_lexer_chunking_equals_one_feed_with_prefix_literals(parts, data):
    lexer = LiteralLexer({"<a": "A", "<abc>": "ABC", ">": "GT"})
    text = "".join(parts)
    whole, _ = lexer.scan("", text, final=True)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(text)), max_size=6))))
    tokens, held, last = [], "", 0
    for cut in [*cuts, len(text)]:
        got, held = lexer.scan(held, text[last:cut])
        tokens += got
        last = cut
    tokens += lexer.scan(held, "", final=True)[0]
    assert _merge(tokens) == _merge(whole)


def _merge(tokens):
    out: list = []
    for name, text in tokens:
        if name is None and out and out[-1][0] is None:
            out[-1] = (None, out[-1][1] + text)
        else:
            out.append((name, text))
    return out


def test_lexer_refuses_a_literal_inside_another():
    with pytest.raises(ValueError, match="occurs inside"):
        LiteralLexer({"ab": "AB", "xaby": "XABY"})


def test_a_grammar_that_reopens_a_call_is_refused():
    bad = Grammar(name="bad", terminals={"OPEN": "<f>", "END": "</f>"}, transitions={
        (State.CONTENT, "OPEN"): Transition(State.TOOL_NAME, (Event.TOOL_CALL_START,)),
        (State.TOOL_NAME, "END"): Transition(State.TOOL_BETWEEN, (Event.TOOL_CALL_END,)),
        (State.TOOL_BETWEEN, "OPEN"): Transition(State.TOOL_ARGS),  # args after the call ended
    })  # fmt: skip
    with pytest.raises(ValueError, match="reopens a call"):
        Family(name="bad", grammar=bad)


def state_bytes(factory, request, text: str) -> int:
    """What a stream carries: the state less what a fresh parser has."""
    parser = factory(request)
    parser.feed(text)
    return len(json.dumps(compact(parser.to_state(), factory(request).to_state())))


def test_state_stays_small_while_nothing_is_undecided():
    factory, request = FACTORIES[0], ParseRequest.from_body({"tools": TOOLS})
    long_reasoning = "step " * 2000
    call = "<tool_call>\n<function=search>\n<parameter=query>\nq\n</parameter>\n</function>\n</tool_call>"
    # Reasoning, then content that starts with a non-space character, then calls.
    assert state_bytes(factory, request, long_reasoning) < 40
    assert state_bytes(factory, request, long_reasoning + "</think>Answer: " + "word " * 2000) < 200
    assert state_bytes(factory, request, long_reasoning + "</think>Answer " + call + call) < 300
    # An open call keeps its raw text, nothing else grows.
    assert state_bytes(factory, request, "</think>Answer " + call[:-30]) < 400


def test_content_starting_with_whitespace_is_streamed_and_keeps_its_whitespace():
    """vLLM strips content when a call follows and keeps it otherwise; holding
    it until then would hold all of it, so a stream sends it with its first
    non-space text (as vLLM's stream does) and only the non-streaming answer
    strips it."""
    factory, request = FACTORIES[0], ParseRequest.from_body({"tools": TOOLS})
    text = "plan</think>\n\n" + "word " * 500
    parser = factory(request)
    assert parser.feed(text).content == "\n\n" + ("word " * 500).rstrip()
    assert state_bytes(factory, request, text) < 200
    assert parser.finish().content == " "
    assert factory(request).feed("plan</think>\n\n").content is None  # whitespace alone waits
    call = "<tool_call>\n<function=search>\n</function>"
    with_call = one_shot(factory, request, text + call, None)
    assert with_call[1] == ("word " * 500).strip() and with_call[2] == [("search", "{}")]
    assert streamed(factory, request, text + call, [20, 40], None)[1] == "\n\n" + ("word " * 500).strip()


def _swap_factory():
    """Qwen3 with the ``swap_blank_content`` hook (nemotron_v3's), unregistered."""
    family = replace(QWEN3, name="swap", reasoning_names=(), tool_names=(),
                     swap_blank_content=lambda sent: sent.get("force") is True)
    engines = Engines(EngineReasoning.build(family, VOCAB, SPECIAL), None)
    return ParserFactory(ParserSpec("swap", None, enable_auto_tools=True), None, engines)


SWAP = _swap_factory()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.sampled_from([*FRAGMENTS, "plan", "  ", "\n\n"]), max_size=10), data=st.data(),
       force=st.booleans(), thinking=st.booleans())
def test_swapped_blank_content_any_chunking_equals_one_shot(parts, data, force, thinking):
    text = "".join(parts)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    request = ParseRequest.from_body({"chat_template_kwargs": {"force": force, "enable_thinking": thinking}})
    assert streamed(SWAP, request, text, cuts, None) == one_shot(SWAP, request, text, None)


def test_swap_reads_the_sent_kwargs_and_holds_only_until_content_shows():
    forced = ParseRequest.from_body({"chat_template_kwargs": {"force": True}})
    assert one_shot(SWAP, forced, "plan</think>\n\n", None) == ("\n\n", "plan", [])
    assert one_shot(SWAP, forced, "plan", None) == (None, "plan", [])
    assert one_shot(SWAP, forced, "plan</think>\n\nanswer", None) == ("plan", "\n\nanswer", [])
    defaulted = ParseRequest.from_body({}, default_chat_template_kwargs={"force": True})
    assert one_shot(SWAP, defaulted, "plan</think>\n\n", None) == ("plan", "\n\n", [])
    parser = SWAP(forced)
    assert parser.feed("step " * 100 + "</think>\n").reasoning is None  # held: the content is blank
    delta = parser.feed("answer")
    assert (delta.reasoning, delta.content) == (("step " * 100).rstrip() + " ", "\nanswer")
    assert state_bytes(SWAP, forced, "plan</think>\n\nanswer " * 50) < 200


@pytest.mark.parametrize(("text", "calls"), [
    ('[{"name": "a", "parameters": {"x": 1}}]', [("a", {"x": 1})]), ("[]", []), (' [{"name": "a"}] ', [("a", None)]),
    ('[{"name": "a", "strict": "yes", "description": null, "extra": 1}]', [("a", None)]),
    ('{"name": "a"}', None), ('[{"name": 1}]', None), ('[{"name": "a", "parameters": []}]', None),
    ('[{"name": "a", "strict": "maybe"}]', None), ('[{"name": "a", "description": 5}]', None), ("", None), ("x", None),
])  # fmt: skip
def test_required_calls_are_read_as_vllm_s_function_definitions(text, calls):
    assert function_definitions(text) == calls


def test_a_named_forced_call_streams_its_arguments_from_the_first_text():
    """forced.py: the content is the call's arguments, leading whitespace and all."""
    stage = ForcedToolStage("get_weather")
    deltas = [stage.feed(t) for t in ["  ", "\n", '{"city"', ': "Paris"}']]
    assert [d.tool_calls for d in deltas[:2]] == [[], []]
    assert (deltas[2].tool_calls[0].name, deltas[2].tool_calls[0].arguments) == ("get_weather", '  \n{"city"')
    resumed = ForcedToolStage("get_weather", json.loads(json.dumps(stage.to_state())))
    assert resumed.finish(False) == (ParsedDelta(), True)
    assert fold(deltas) == (None, None, [("get_weather", '  \n{"city": "Paris"}')])
    blank = ForcedToolStage("get_weather")
    blank.feed(" \n")
    assert blank.finish(False) == (ParsedDelta(), True)
    required = ForcedToolStage(None)
    for part in ['[{"name": "a", ', '"parameters": {"é": 1}}]']:
        assert not required.feed(part)
    delta, _ = required.finish(False)
    assert [(c.name, c.arguments) for c in delta.tool_calls] == [("a", '{"é": 1}')]


FRAMED = {"<t>\n": "T", "<t>": "T", "\n</t>\n": "E", "\n</t>": "E", "</t>\n": "E", "</t>": "E",
          "\n<c>\n": "C", "\n<c>": "C", "<c>\n": "C", "<c>": "C", "\n</c>": "D", "</c>": "D"}  # fmt: skip


@given(st.lists(st.sampled_from(["<t>", "</t>", "<c>", "</c>", "\n", "x", "<", "/", "c>", "t"]), max_size=12),
       st.data())
def test_lexer_chunking_equals_one_feed_with_framed_literals(parts, data):
    """Ripple's markers with optional framing newlines: an inner literal inside
    an outer one is decidable when a literal matches at the outer's start."""
    lexer = LiteralLexer(FRAMED)
    text = "".join(parts)
    whole, _ = lexer.scan("", text, final=True)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(text)), max_size=6))))
    tokens, held, last = [], "", 0
    for cut in [*cuts, len(text)]:
        got, held = lexer.scan(held, text[last:cut])
        tokens += got
        last = cut
    tokens += lexer.scan(held, "", final=True)[0]
    assert _merge(tokens) == _merge(whole)
    assert lexer.scan("", "a\n</t>\nb", final=True)[0] == [(None, "a"), ("E", "\n</t>\n"), (None, "b")]
