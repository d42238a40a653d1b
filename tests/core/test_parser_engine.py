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
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

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
from derender_queue.core.parsers.engine import EngineReasoning, EngineTools
from derender_queue.core.parsers.engine.calls import make_accept
from derender_queue.core.parsers.engine.family import Family
from derender_queue.core.parsers.engine.grammar import Event, Grammar, State, Transition
from derender_queue.core.parsers.factory import ParserFactory
from derender_queue.core.parsers.families.glm import glm_name
from derender_queue.core.parsers.families.mistral import mistral_name
from derender_queue.core.parsers.families.qwen3 import QWEN3
from derender_queue.core.parsers.forced import ForcedToolStage, required_calls
from derender_queue.core.parsers.lexer import LiteralLexer
from derender_queue.core.parsers.stages import Engines, ParserSpec
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
    msg = parse_message(factory, replace(request, prompt_token_ids=prompt), text, [], "stop")
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


GLM_VOCAB = {**VOCAB, "<|user|>": 129284, "<|assistant|>": 129285}
GLM_PAIRS = [("glm47", "glm47"), ("glm45", None), (None, "glm45"), ("deepseek_r1", "glm47")]
GLM_FACTORIES = [build_parser_factory(r, t, vocab=GLM_VOCAB, enable_auto_tools=True, special_tokens=SPECIAL)
                 for r, t in GLM_PAIRS]  # fmt: skip
GLM_REQUESTS = [*REQUESTS, {"tools": TOOLS, "chat_template_kwargs": {"thinking": False}}]
GLM_FRAGMENTS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>",
                 "</arg_value>", "\n", " ", "search", "query", "k", "5", "x", "<|user|>", '"name": "search"', "<",
                 "杭州", "<tool_call>search\n<arg_key>query</arg_key>\n<arg_value>q</arg_value>\n</tool_call>"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(st.sampled_from(GLM_FRAGMENTS), max_size=14),
    data=st.data(),
    which=st.integers(0, len(GLM_PAIRS) - 1),
    req=st.integers(0, len(GLM_REQUESTS) - 1),
    prompt=st.sampled_from([None, [129285], [129285, 128821], [129285, 128822]]),
)
def test_glm_any_chunking_and_state_round_trip_equal_one_shot(parts, data, which, req, prompt):
    """The family hooks GLM needs (a thinking-off grammar, stripped names)
    keep the chunking promise too."""
    text = "".join(parts)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    factory, request = GLM_FACTORIES[which], ParseRequest.from_body(GLM_REQUESTS[req])
    assert same_answer(streamed(factory, request, text, cuts, prompt), one_shot(factory, request, text, prompt))


def test_a_family_can_strip_call_names_before_accepting_them():
    """``Family.call_name`` (Glm47MoeParser._emit_name_delta strips): GLM's
    name runs up to the first ``<arg_key>``, newline included; the stripped
    name is what vLLM validates, so the call is announced and the text after
    it dropped."""
    factory, request = GLM_FACTORIES[0], ParseRequest.from_body({"tools": TOOLS})
    text = "r</think>Hello <tool_call>search\n<arg_key>query</arg_key>\n<arg_value>q</arg_value>\n</tool_call> after"
    assert one_shot(factory, request, text, None) == ("r", "Hello", [("search", '{"query": "q"}')])
    assert streamed(factory, request, text, list(range(0, len(text), 3)), None)[1:] == ("Hello", [
        ("search", '{"query": "q"}')])


def test_glm_name_rule_follows_the_strip_overrides():
    """``glm_name``, traced through ``Glm47MoeParser``'s overrides: a name
    with text is stripped; an empty one adopts the arguments' ``"name"``
    stripped if the request accepts it so, else as it is (the base
    ``_handle_tool_end``); a blank one only as it is."""
    accept = make_accept(TOOLS, validate=True)
    assert glm_name(" search\n", None, accept) == glm_name(" search\n", "", accept) == "search"
    assert glm_name("  ", None, accept) == ""
    assert glm_name("", '"name": " search "', accept) == "search"
    assert glm_name("  ", '"name": " search "', accept) == ""
    assert glm_name("  ", '"name": "search"', accept) == "search"
    anything = make_accept(None, validate=True)
    assert glm_name("", '"name": "  "', anything) == "  "


def test_a_family_can_have_a_grammar_for_thinking_off():
    """``Family.grammar_without_thinking``: GLM's config with thinking off has
    no ``<think>`` terminals, so its tool pass keeps them as content text."""
    factory = GLM_FACTORIES[0]
    on, off = (ParseRequest.from_body({"tools": TOOLS, "chat_template_kwargs": {"thinking": t}}) for t in (True, False))
    assert one_shot(factory, on, "r</think>Hi </think>x", None) == ("r", "Hi x", [])
    assert one_shot(factory, off, "r</think>Hi </think>x", None) == (None, "r</think>Hi </think>x", [])
    assert streamed(factory, off, "r</think>Hi </think>x", [1, 5, 12], None) == (None, "r</think>Hi </think>x", [])


def test_a_forced_tool_choice_reads_json_where_vllm_keeps_supports_required_and_named():
    """``parsers/forced.py`` (Seed-OSS's tool parser has no structural
    tag model): a named tool's arguments are the content, sent once it is not
    blank; "required" validates a JSON list of {name, parameters} at the end."""
    factory = build_parser_factory("seed_oss", "seed_oss", vocab=VOCAB, enable_auto_tools=True, special_tokens=SPECIAL)
    named = ParseRequest.from_body({"tools": TOOLS,
                                    "tool_choice": {"type": "function", "function": {"name": "search"}}})
    text = 'r</seed:think>\n{"query": "q"}'
    assert one_shot(factory, named, text, None) == ("r", "", [("search", '\n{"query": "q"}')])
    assert streamed(factory, named, text, list(range(len(text))), None) == ("r", "", [("search", '\n{"query": "q"}')])
    assert one_shot(factory, named, "r</seed:think> \n", None) == ("r", "", [])
    required = ParseRequest.from_body({"tools": TOOLS, "tool_choice": "required"})
    text = 'r</seed:think>[{"name": "search", "parameters": {"k": 5}}, {"name": "search"}]'
    want = ("r", "", [("search", '{"k": 5}'), ("search", "null")])
    assert one_shot(factory, required, text, None) == want
    assert streamed(factory, required, text, [3, 20, 40], None) == want
    assert one_shot(factory, required, 'r</seed:think>[{"name": 1}]', None) == ("r", "", [])


def test_minimax_m2_append_think_prefixes_the_tag_and_makes_a_legacy_composition():
    """``parsers/append_think.py``: no reasoning, content "<think>" + output;
    with an engine tool parser a turn without calls returns it untouched."""
    request = ParseRequest.from_body({"tools": TOOLS})
    for tools in (None, "minimax_m2"):
        factory = build_parser_factory("minimax_m2_append_think", tools, vocab=VOCAB, enable_auto_tools=True,
                                       special_tokens=SPECIAL)
        text = "r</think>Hi </minimax:tool_call>"
        assert one_shot(factory, request, text, None) == (None, "<think>" + text, [])
        assert streamed(factory, request, text, [0, 1, 2], None) == (None, "<think>" + text, [])
    call = '<minimax:tool_call><invoke name="search"><parameter name="k">5</parameter></invoke></minimax:tool_call>'
    assert one_shot(factory, request, "r</think>Hi " + call, None) == (None, "<think>rHi", [("search", '{"k": 5}')])


STEP3_CALL = ("<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"search\">"
              "<steptml:parameter name=\"k\"> 5 </steptml:parameter></steptml:invoke><｜tool_call_end｜>"
              "<｜tool_calls_end｜>")  # fmt: skip


@pytest.mark.parametrize(("text", "want"), [
    ("r</think>  Hi " + STEP3_CALL + "  bye \n", ("r", "Hi   bye", [("search", '{"k": 5}')])),
    ("r</think>\n " + STEP3_CALL + " \n", ("r", None, [("search", '{"k": 5}')])),
    ("r</think>Hi " + STEP3_CALL[:60], ("r", "Hi " + STEP3_CALL[:60], [])),
    ("r</think>Hi " + STEP3_CALL.replace("function", "other") + " x", ("r", "Hi " + STEP3_CALL.replace(
        "function", "other") + " x", [])),
])  # fmt: skip
def test_step3_tools_any_chunking_equals_one_shot(text, want):
    """``parsers/step3_tools.py`` (not an engine): content around the block,
    stripped, when it made a call; the text as it came when not."""
    factory = build_parser_factory("step3", "step3", vocab=VOCAB, enable_auto_tools=True, special_tokens=SPECIAL)
    request = ParseRequest.from_body({"tools": TOOLS})
    assert one_shot(factory, request, text, None) == want
    for step in (1, 2, 5):
        assert same_answer(streamed(factory, request, text, list(range(0, len(text), step)), None), want)


def test_a_family_can_keep_content_whitespace_beside_calls():
    """``drop_whitespace_only_content_before_tools`` off (Step-5's tool
    parser): whitespace-only content before a call slot that made no call is
    kept; beside a call the serving layer's auto branch still turns it into
    None, its "none" branch does not."""
    factory = build_parser_factory(None, "step5", vocab=VOCAB, enable_auto_tools=True, special_tokens=SPECIAL)
    request = ParseRequest.from_body({"tools": TOOLS})
    call = "<tool_call>\n<function=search>\n</function>\n</tool_call>"
    assert one_shot(factory, request, " \n<tool_call>\n<function=  >\n</function>", None) == (None, " \n", [])
    assert one_shot(factory, request, " \n" + call, None) == (None, None, [("search", "{}")])
    assert one_shot(factory, request, " Hi \n" + call, None) == (None, " Hi \n", [("search", "{}")])
    none = ParseRequest.from_body({"tool_choice": "none"})  # no tools: the calls are parsed, then dropped
    assert one_shot(factory, none, " \n" + call, None) == (None, " \n", [])


@pytest.mark.parametrize("text", [
    "abc\n</think>\n\n<response>\ndef\n</response>\n", "abc</think>pre <response>a</response> mid </response> t",
    "abc</think>pre <response>no end", "abc</think>x </response> y <response> z", "abc</think>  <tool_call>junk",
    'abc</think>Hi\n\n<tool_call>\n{"name": "search", "arguments": {"k": 5}}\n</tool_call>\n',
    'abc</think>Hi <tool_call>{"name": "search", "arguments": {}}</tool_call><tool_call>{bad}</tool_call>',
])  # fmt: skip
def test_ernie45_any_chunking_equals_one_shot(text):
    """``parsers/ernie45.py`` (not engines): the content between the first
    <response> and the last </response>; JSON calls, all or none."""
    factory = build_parser_factory("ernie45", "ernie45", vocab=VOCAB, enable_auto_tools=True, special_tokens=SPECIAL)
    request = ParseRequest.from_body({"tools": TOOLS})
    want = one_shot(factory, request, text, None)
    for step in (1, 2, 3, 7):
        assert same_answer(streamed(factory, request, text, list(range(0, len(text), step)), None), want)


@pytest.mark.parametrize(("text", "want"), [
    ("<think>r</think>c", ("r", "c", [])), ("<think><think>r</think>c", ("<think>r", "c", [])),
    (" <think>r</think>c", (" <think>r", "c", [])), ("<think>r", (None, "<think>r", [])),
    ("<think></think>", (None, None, [])), ("a</think>b</think>c", ("a", "b</think>c", [])), ("", (None, "", [])),
])  # fmt: skip
def test_olmo3_holds_until_the_first_think_end(text, want):
    """``parsers/olmo3.py`` (not an engine): without a </think> all of it is
    content, so nothing is sent before the first one."""
    factory = build_parser_factory("olmo3", None, vocab=VOCAB, enable_auto_tools=True, special_tokens=SPECIAL)
    request = ParseRequest.from_body({})
    assert one_shot(factory, request, text, None) == want
    for step in (1, 2, 5):
        assert streamed(factory, request, text, list(range(0, len(text), step)), None) == want


HY_VOCAB = {**VOCAB, "<tool_calls>": 129290, "</tool_calls>": 129291}
HY_V4_CALL = ("<tool_calls><tool_call>search<arg_key>query</arg_key><arg_value>q</arg_value><arg_key>k</arg_key>"
              "<arg_value>5</arg_value></tool_call></tool_calls>")


@pytest.mark.parametrize(("names", "body", "text", "want"), [
    (("hunyuan_a13b", "hunyuan_a13b"), {"tools": TOOLS}, "<think>\nr\n</think>\n<answer>\nHi\n</answer>",
     ("r", "Hi", [])),
    (("hunyuan_a13b", "hunyuan_a13b"), {"tools": TOOLS}, "<think>\nr\n</think>\n<answer>\nHi "
     '<tool_calls>[{"name": "search", "arguments": {"k": 5}}]</tool_calls>\n</answer>',
     ("r", "Hi ", [("search", '{"k": 5}')])),
    (("hunyuan_a13b", None), {}, "plain", (None, "plain", [])),
    ((None, "hunyuan_a13b"), {"tools": TOOLS}, "<think><tool_calls>[]</tool_calls></think> <tool_calls>[bad]",
     (None, "<think><tool_calls>[]</tool_calls></think> <tool_calls>[bad]", [])),
    (("hy_v3", "hy_v3"), {"tools": TOOLS}, "r</think>Hi", (None, "r</think>Hi", [])),  # no_think by default
    (("hy_v3", "hy_v3"), {"tools": TOOLS, "reasoning_effort": "high"}, "r</think>Hi <tool_calls><tool_call>search"
     "<tool_sep><arg_key>k</arg_key> <arg_value>5</arg_value></tool_call></tool_calls>",
     ("r", "Hi ", [("search", '{"k": 5}')])),
    (("hy_v3", "hy_v3"), {"tools": TOOLS, "reasoning_effort": "high"}, "r</think>  <tool_calls>junk", ("r", None, [])),
    (("hy_v4", "hy_v4"), {"tools": TOOLS}, "r</think>Hi " + HY_V4_CALL,
     ("r", "Hi ", [("search", '{"query": "q", "k": 5}')])),
    (("hy_v4", "hy_v4"), {"tools": TOOLS}, "r</think>Hi <tool_calls><tool_call>f<arg_key>k</arg_key> x</tool_call>",
     ("r", "Hi <tool_calls><tool_call>f<arg_key>k</arg_key> x</tool_call>", [])),
    (("hy_v4", "hy_v4"), {"tools": TOOLS}, "r</think>Hi </tool_calls> " + HY_V4_CALL,
     ("r", "Hi </tool_calls> " + HY_V4_CALL, [])),  # its first </tool_calls> comes before <tool_calls>
    (("hy_v4", None), {"chat_template_kwargs": {"reasoning_effort": "no_think"}}, "r</think>c",
     (None, "r</think>c", [])),
])  # fmt: skip
def test_hunyuan_any_chunking_equals_one_shot(names, body, text, want):
    """``parsers/hunyuan.py`` (not engines): A13B's reasoning holds the whole
    output; the tool stages stream the content before a call block and hold
    the rest; ``hy_v3``/``hy_v4`` reasoning follows ``reasoning_effort``."""
    factory = build_parser_factory(*names, vocab=HY_VOCAB, enable_auto_tools=True, special_tokens=SPECIAL)
    assert factory is not None
    request = ParseRequest.from_body(body)
    assert one_shot(factory, request, text, None) == want
    for step in (1, 2, 3, 7):
        assert streamed(factory, request, text, list(range(0, len(text), step)), None) == want


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


NESTED = {"ab": "AB", "xaby": "XABY", "]<]m[>[<t>": "T", "]<]m[>[<i n=": "I", "]<]m[>[<i n=\"": "IQ", ">": "GT"}


def _leftmost_longest(literals, text):
    """The one-feed tokens as vLLM's lexer reads a whole text."""
    out, pos = [], 0
    for m in re.finditer("|".join(re.escape(t) for t in sorted(literals, key=len, reverse=True)), text):
        out += [(None, text[pos : m.start()])] if m.start() > pos else []
        out.append((literals[m.group()], m.group()))
        pos = m.end()
    return _merge(out + ([(None, text[pos:])] if pos < len(text) else []))


@given(st.lists(st.sampled_from(["ab", "xa", "y", "]<]m", "[>[", "<t>", "<i n=", '"', ">", "[", "z"]), max_size=12),
       st.data())
def test_lexer_holds_a_literal_inside_another_until_the_outer_one_is_decided(parts, data):
    """A literal inside another's prefix at an offset (MiniMax M3's ``>`` in
    ``]<]minimax[>[<tool_call>``): any chunking gives the one-feed tokens,
    which are the leftmost-longest matches."""
    lexer = LiteralLexer(NESTED)
    text = "".join(parts)
    whole, _ = lexer.scan("", text, final=True)
    assert _merge(whole) == _leftmost_longest(NESTED, text)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(text)), max_size=6))))
    tokens, held, last = [], "", 0
    for cut in [*cuts, len(text)]:
        got, held = lexer.scan(held, text[last:cut])
        assert len(held) < max(map(len, NESTED))
        tokens += got
        last = cut
    tokens += lexer.scan(held, "", final=True)[0]
    assert _merge(tokens) == _merge(whole)


def test_lexer_inner_literal_waits_for_the_outer_one():
    lexer = LiteralLexer(NESTED)
    assert lexer.scan("", "a ]<]m[>") == ([(None, "a ")], "]<]m[>")  # may still become ]<]m[>[<t>
    assert lexer.scan("]<]m[>", "[<t>b") == ([("T", "]<]m[>[<t>"), (None, "b")], "")
    assert lexer.scan("]<]m[>", "[z") == ([(None, "]<]m["), ("GT", ">"), (None, "[z")], "")
    assert lexer.scan("", "xab") == ([], "xab")  # xaby may still come
    assert lexer.scan("xab", "c") == ([(None, "x"), ("AB", "ab"), (None, "c")], "")


def test_a_grammar_that_reopens_a_call_is_refused():
    bad = Grammar(name="bad", terminals={"OPEN": "<f>", "END": "</f>"}, transitions={
        (State.CONTENT, "OPEN"): Transition(State.TOOL_NAME, (Event.TOOL_CALL_START,)),
        (State.TOOL_NAME, "END"): Transition(State.TOOL_BETWEEN, (Event.TOOL_CALL_END,)),
        (State.TOOL_BETWEEN, "OPEN"): Transition(State.TOOL_ARGS),  # args after the call ended
    })  # fmt: skip
    with pytest.raises(ValueError, match="reopens a call"):
        Family(name="bad", grammar=bad)


def _block_grammar(**preamble: Transition) -> Grammar:
    """DSML's shape: a block opener enters the preamble without a call; each
    invoke in it starts one."""
    transitions = {
        (State.CONTENT, "OPEN"): Transition(State.TOOL_PREAMBLE),
        (State.TOOL_PREAMBLE, "INVOKE"): Transition(State.TOOL_NAME, (Event.TOOL_CALL_START,)),
        (State.TOOL_NAME, "GT"): Transition(State.TOOL_ARGS),
        (State.TOOL_ARGS, "END"): Transition(State.TOOL_BETWEEN, (Event.TOOL_CALL_END,)),
        (State.TOOL_BETWEEN, "OPEN"): Transition(State.TOOL_PREAMBLE),
    }
    transitions.update({(State.TOOL_PREAMBLE, t): tr for t, tr in preamble.items()})
    return Grammar(name="block", terminals={"OPEN": "<b>", "INVOKE": "<i=", "GT": ">", "END": "</i>"},
                   transitions=transitions)


def test_a_quiet_preamble_needs_no_call_start():
    """A preamble that emits nothing and starts a call on every way to a name
    opens no call (DeepSeek V3.2/V4.1); one that reaches a name without a
    start still reopens a call."""
    Family(name="block", grammar=_block_grammar())
    with pytest.raises(ValueError, match="reopens a call"):
        Family(name="bad", grammar=_block_grammar(GT=Transition(State.TOOL_ARGS)))


def test_args_rewrite_gets_the_name_of_the_first_call_with_the_same_raw_arguments():
    """vLLM's DeepSeek V3.2/V4.1 ``_convert_args`` look the function name up
    by identical raw arguments: the second call below is unwrapped with the
    first call's schema (``run`` has an ``input`` key, ``search`` not), and
    the lookup survives a state round trip."""
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": p}}}
             for n, p in (("search", {"query": {"type": "string"}}), ("run", {"input": {"type": "string"}}))]
    factory = build_parser_factory(None, "deepseek_v32", vocab={}, enable_auto_tools=True, special_tokens=SPECIAL)
    request = ParseRequest.from_body({"tools": tools})
    wrapped = '<｜DSML｜parameter name="input" string="false">{"query": "q"}</｜DSML｜parameter>'
    def call(name: str) -> str:
        return f'<｜DSML｜invoke name="{name}">{wrapped}</｜DSML｜invoke>'

    text = "<｜DSML｜function_calls>" + call("search") + call("run") + "</｜DSML｜function_calls>"
    want = (None, None, [("search", '{"query": "q"}'), ("run", '{"query": "q"}')])
    assert one_shot(factory, request, text, None) == want
    assert streamed(factory, request, text, [60, 140, 200], None) == want
    # The first call named "run" keeps its wrapper, and so does the second.
    text = "<｜DSML｜function_calls>" + call("run") + call("search") + "</｜DSML｜function_calls>"
    assert one_shot(factory, request, text, None)[2] == [("run", '{"input": {"query": "q"}}'),
                                                        ("search", '{"input": {"query": "q"}}')]


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


def _tool_pass(family: Family, request: dict, text: str, cut: int) -> tuple:
    """A family's tool pass alone, fed in two chunks with a state round trip."""
    tools = EngineTools.build(family, SPECIAL, skip_reasoning=False)
    req = ParseRequest.from_body(request)
    stage = tools.stage(req, None, suppress=False, legacy=False, whole=False)
    first = stage.feed(text[:cut])
    stage = tools.stage(req, json.loads(json.dumps(stage.to_state())), suppress=False, legacy=False, whole=False)
    rest = stage.feed(text[cut:])
    last, _ = stage.finish(False)
    return fold([first, rest, last])


def test_a_name_rule_and_a_grammar_without_thinking():
    """``Family.call_name`` reads a call's name (here ``id:NAME``, else a name
    in the arguments once they came, else the raw header), and a request with
    thinking off runs ``grammar_without_thinking`` (here without ``</think>``,
    which the grammar with thinking drops from content)."""
    transitions = {
        (State.CONTENT, "THINK_END"): Transition(State.CONTENT),
        (State.CONTENT, "OPEN"): Transition(State.TOOL_NAME, (Event.TOOL_CALL_START,)),
        (State.TOOL_NAME, "GT"): Transition(State.TOOL_ARGS),
        (State.TOOL_ARGS, "END"): Transition(State.TOOL_BETWEEN, (Event.TOOL_CALL_END,)),
        (State.TOOL_BETWEEN, "OPEN"): Transition(State.TOOL_NAME, (Event.TOOL_CALL_START,)),
    }
    terminals = {"OPEN": "<f ", "GT": ">", "END": "</f>"}
    grammar = Grammar(name="t", terminals={**terminals, "THINK_END": "</think>"}, transitions=transitions,
                      arg_converter=lambda raw: raw.strip() or "{}")  # fmt: skip
    without = replace(grammar, terminals=terminals,
                      transitions={k: v for k, v in transitions.items() if k[1] != "THINK_END"})

    def rule(raw: str, args: str | None, accept: Callable[[Any], bool]) -> str:
        if raw.startswith("id:"):
            return raw[3:]
        if args is None:
            return ""
        return json.loads(args).get("name", "") if args else raw

    family = Family(name="t", grammar=grammar, call_name=rule, grammar_without_thinking=without,
                    thinking=lambda kw: kw.get("thinking", True))  # fmt: skip
    text = 'a</think>b<f id:search>{"q": 1}</f><f x>{"name": "run"}</f><f raw></f>'
    calls = [("search", '{"q": 1}'), ("run", '{"name": "run"}'), ("raw", "{}")]
    assert _tool_pass(family, {}, text, 20) == (None, "ab", calls)
    assert _tool_pass(family, {"chat_template_kwargs": {"thinking": False}}, text, 20) == (None, "a</think>b", calls)
def _call_family(call_name: Any = None, **flags) -> Family:
    """``<c>name|args``, calls back to back: the call-building overrides under test."""
    grammar = Grammar(name="calls", terminals={"CALL": "<c>", "SEP": "|"}, transitions={
        (State.CONTENT, "CALL"): Transition(State.TOOL_NAME, (Event.TOOL_CALL_START,)),
        (State.TOOL_NAME, "SEP"): Transition(State.TOOL_ARGS),
        (State.TOOL_ARGS, "CALL"): Transition(State.TOOL_NAME, (Event.TOOL_CALL_END, Event.TOOL_CALL_START)),
    }, **flags)  # fmt: skip
    return Family(name="calls", grammar=grammar, **({"call_name": call_name} if call_name else {}))


def _cut_pass(family: Family, text: str, cuts: list[int]) -> tuple:
    """The tool pass alone, fed at `cuts` and resumed from its JSON state each time."""
    tools, request, state = EngineTools.build(family, [], skip_reasoning=True), ParseRequest.from_body({}), None
    acc, last = DeltaAccumulator(), 0
    for cut in [*cuts, len(text)]:
        stage = tools.stage(request, state, suppress=False, legacy=False, whole=not cuts)
        acc.add(stage.feed(text[last:cut]))
        state, last = json.loads(json.dumps(stage.to_state())), cut
    acc.add(tools.stage(request, state, suppress=False, legacy=False, whole=not cuts).finish(False)[0])
    return acc.content, [(c["function"]["name"], c["function"]["arguments"]) for c in acc.tool_calls]


def _first_json_value(raw: str) -> str:
    return raw.strip()[: json.JSONDecoder().raw_decode(raw.strip())[1]]


@pytest.mark.parametrize("cuts", [[], [3, 9, 20], list(range(1, 60))])
def test_call_building_overrides(cuts):
    """vLLM's ParserEngine builds a nameless call from a ``"name"`` in its
    arguments and drops calls without a name; a subclass (Mistral) may
    accept "" instead, never read names from the arguments and take its
    arguments as the first JSON value (Grammar's fields; the name rule is
    ``Family.call_name``, here Mistral's)."""
    body = 'a <c>|{"name": "search", "arguments": {"q": 1}}<c>named|{"k": 2} more<c>  |'
    assert _cut_pass(_call_family(), body, cuts) == ("a", [("search", '{"q": 1}'), ("named", '{"k": 2} more')])
    mistral_like = _call_family(mistral_name, accept_empty_tool_names=True, json_envelope=False,
                                args_json=_first_json_value)
    assert _cut_pass(mistral_like, body, cuts) == (
        "a", [("", '{"name": "search", "arguments": {"q": 1}}'), ("named", '{"k": 2}'), ("", "{}")])
    # An empty slot is no call (and no call strips the content).
    assert _cut_pass(mistral_like, "x <c>", cuts) == ("x ", [])
    assert _cut_pass(_call_family(), "x <c>|{}", cuts) == ("x ", [])


def test_a_family_picks_its_variant_from_the_vocabulary():
    plain = _call_family()
    picky = Family(name="calls", grammar=plain.grammar, for_vocab=lambda v: plain if "<c>" in v else picky)
    assert picky.resolve({"<c>": 1}) is plain and picky.resolve({}) is picky and picky.resolve(None) is picky
    assert plain.resolve({}) is plain


@pytest.mark.parametrize("vocab", [{}, {"[TOOL_CALLS]": 1}])
def test_mistral_refuses_a_tokenizer_it_cannot_parse(vocab):
    """No [TOOL_CALLS]: vLLM refuses to start; no [ARGS] (pre-v11): vLLM's
    legacy JSON-array parsing, not modelled (docs/parsers.md)."""
    for r, t in [("mistral", None), (None, "mistral")]:
        with pytest.raises(ValueError, match=r"tool call token|pre-v11"):
            build_parser_factory(r, t, vocab=vocab, enable_auto_tools=True)


def _collection_family(mode: str) -> Family:
    grammar = Grammar(name="coll", terminals={"START": "<c>"}, transitions={
        (State.CONTENT, "START"): Transition(State.TOOL_ARGS)}, tool_call_body_collection=mode)  # fmt: skip
    return Family(name="coll", grammar=grammar)


@pytest.mark.parametrize("cuts", [[], [4, 11, 30], list(range(1, 90))])
def test_json_collection_bodies_make_one_call_per_object(cuts):
    """vLLM's tool_call_body_collection: each top-level object of the body is
    a call; the first character that is neither whitespace nor the format's
    delimiter makes the rest content (a JSON array's "]" is dropped)."""
    a, b = '{"name": "a", "arguments": {"s": "}; {"}}', '{"name": "b", "parameters": [1, {"x": "]"}]}'
    semi = _collection_family("semicolon_sequence")
    assert _cut_pass(semi, f"x<c>{a} ; {b}", cuts) == ("x", [("a", '{"s": "}; {"}'), ("b", '[1, {"x": "]"}]')])
    # No ";" between: content, dropped after a call.
    assert _cut_pass(semi, f"x<c>{a}{b}", cuts) == ("x", [("a", '{"s": "}; {"}')])
    assert _cut_pass(semi, f"x<c>{a};;{b}", cuts) == ("x", [("a", '{"s": "}; {"}')])
    assert _cut_pass(semi, "x<c> hello", cuts) == ("xhello", [])  # whitespace before it is dropped
    array = _collection_family("json_array")
    assert _cut_pass(array, f"x<c>[{a}, {b}] after", cuts)[1] == [("a", '{"s": "}; {"}'), ("b", '[1, {"x": "]"}]')]
    assert _cut_pass(array, f"x<c>{a}", cuts) == (f"x{a}", [])  # no "[": content
    truncated = '{"name": "a", "arguments": {"s": 1'  # an open object ends its call at the end
    assert _cut_pass(array, f"x<c>[{truncated}", cuts) == ("x", [("a", truncated)])


LLAMA = build_parser_factory(None, "llama3_json", vocab={}, enable_auto_tools=True, special_tokens=["<|eot_id|>"])
LLAMA_FRAGMENTS = ["<|python_tag|>", "{", "}", ";", " ", "\n", '"', "x", '{"name": "search", "parameters": {"q": 1}}',
                   '"name": "search"', '"arguments": {}', "<|eom_id|>", "<|eot_id|>", "[", "]", "\\", "Sure. "]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.sampled_from(LLAMA_FRAGMENTS), max_size=10), data=st.data(),
       req=st.integers(0, len(REQUESTS) - 1))
def test_llama_json_chunking_and_state_round_trip_equal_one_shot(parts, data, req):
    """The validator's hold, the implicit <|python_tag|> and the collection
    body resume from their state at any cut."""
    text = "".join(parts)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    request = ParseRequest.from_body(REQUESTS[req])
    assert streamed(LLAMA, request, text, cuts, None) == one_shot(LLAMA, request, text, None)


def test_llama_json_validated_output_is_held_until_the_end():
    """An output starting with a call is all held (a later malformed object
    makes the whole of it content, vLLM's complete_tool_call_validator);
    other output streams as it comes."""
    request = ParseRequest.from_body({"tools": TOOLS})
    call = '{"name": "search", "parameters": {"query": "q"}}'
    parser = LLAMA(request)
    assert parser.feed(call + "; " + call).tool_calls == []
    assert [c.name for c in parser.finish().tool_calls] == ["search", "search"]
    parser = LLAMA(request)
    assert parser.feed(call + "; " + call + " and text").tool_calls == []
    assert parser.finish().content == call + "; " + call + " and text"
    assert LLAMA(request).feed("Sure. " + call).content == "Sure. " + call


GRANITE = build_parser_factory(None, "granite", vocab={}, enable_auto_tools=True, special_tokens=["<|tool_call|>"])
SEARCH = [{"type": "function", "function": {"name": "search"}}]


@pytest.mark.parametrize(("choice", "text", "calls"), [
    ({"type": "function", "function": {"name": "search"}}, '{"query": "q"} ', [("search", '{"query": "q"} ')]),
    ({"type": "function", "function": {"name": "search"}}, "  ", []),
    ("required", '[{"name": "search", "parameters": {"q": 1}, "extra": 1}, {"name": "b"}]',
     [("search", '{"q": 1}'), ("b", "null")]),
    ("required", '[{"name": 5}]', []),
    ("required", '<|tool_call|>[{"name": "search", "arguments": {}}]', []),
])  # fmt: skip
def test_a_forced_tool_choice_is_parsed_the_standard_way(choice, text, calls):
    """Family.supports_required_and_named (vLLM's flag, on
    for Granite): a named tool takes the content as its arguments, "required"
    a JSON list of function definitions; the content is then "" (forced)."""
    request = ParseRequest.from_body({"tools": SEARCH, "tool_choice": choice})
    want = (None, "", calls)
    assert one_shot(GRANITE, request, text, None) == want
    assert streamed(GRANITE, request, text, [3, 7, 20], None) == want


GRANITE_THINKING = build_parser_factory("granite_thinking_parser", "granite_toolcall_parser", vocab=VOCAB,
                                        enable_auto_tools=True, special_tokens=SPECIAL)


@pytest.mark.parametrize(("kwargs", "text", "want"), [
    ({}, "plan\n</think>\n\n\nAnswer\n", ("plan", "Answer\n", [])),
    ({}, "plan\n</think>\n\n", ("plan", None, [])),
    ({}, "plan  ", ("plan", None, [])),
    ({"force_nonempty_content": True}, "plan  ", (None, "plan", [])),
    ({"force_nonempty_content": True}, "plan</think>\n", ("plan", None, [])),
    ({"force_nonempty_content": True}, "plan</think>x", ("plan", "x", [])),
    ({"enable_thinking": False}, "\n\nAnswer", (None, "Answer", [])),
])  # fmt: skip
def test_granite_content_loses_leading_newlines_and_a_forced_turn_swaps(kwargs, text, want):
    """Family.content_lstrip_newlines and swap_absent_content_only (Granite 4.2 over
    Qwen3's extract_reasoning), chunked and resumed at every character."""
    request = ParseRequest.from_body({"chat_template_kwargs": kwargs})
    assert one_shot(GRANITE_THINKING, request, text, None) == want
    assert streamed(GRANITE_THINKING, request, text, list(range(len(text))), None) == want
def _swap_factory():
    """Qwen3 with the ``swap_blank_content`` hook (nemotron_v3's), unregistered."""
    family = replace(QWEN3, name="swap", reasoning_names=(), tool_names=(),
                     swap_blank_content=lambda sent: sent.get("force") is True)
    engines = Engines(EngineReasoning.build(family, VOCAB, SPECIAL), None)
    return ParserFactory(ParserSpec("swap", None, enable_auto_tools=True), engines)


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
    """``forced.required_calls``: pydantic's validation of vLLM's
    ``list[FunctionDefinition]`` (None here: it raises, so no call)."""
    assert required_calls(text) == [(name, json.dumps(params, ensure_ascii=False)) for name, params in calls or []]


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


# Gemma 4 (families/gemma4.py), FunctionGemma and MiniMax M3: the hooks these added.
GEMMA4_VOCAB = {"<think>": 128821, "</think>": 128822, "<|channel>": 129280, "<channel|>": 129281,
                "<|tool_call>": 129282, "<tool_call|>": 129283, '<|"|>': 129284}  # fmt: skip
GEMMA4_SPECIAL = [*SPECIAL, "<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", '<|"|>', "<turn|>"]
GEMMA4 = build_parser_factory("gemma4", "gemma4", vocab=GEMMA4_VOCAB, enable_auto_tools=True,
                              special_tokens=GEMMA4_SPECIAL)  # fmt: skip
Q = '<|"|>'


@pytest.mark.parametrize(("text", "want"), [
    ("plain answer", (None, "plain answer", [])),
    ("thought\nr<channel|>answer", ("r", "answer", [])),  # a "thought" start opens reasoning
    ("r<channel|>answer", ("r", "answer", [])),  # so does a <channel|> anywhere
    ("a<channel|>b<|channel>c<channel|>d", ("c", "abd", [])),  # unless a <|channel> shows
    ("thought", (None, None, [])), ("<|channel>thought\nx<channel|>y", ("x", "y", [])),
    ("<|channel>r<channel|>thought\nz", ("r", None, [])),  # the tool pass reads it again
    (f"<|tool_call>call:search{{query:{Q}a,b{Q},k:5}}<tool_call|>",
     (None, None, [("search", '{"query": "a,b", "k": 5}')])),
])  # fmt: skip
def test_gemma4_first_feed_and_prefix(text, want):
    request = ParseRequest(tools=TOOLS)
    assert one_shot(GEMMA4, request, text, None) == want
    for step in (1, 3):
        assert same_answer(streamed(GEMMA4, request, text, list(range(0, len(text), step)), None), want)


def test_gemma4_holds_an_undecided_output_until_a_channel_opener():
    """Until ``<|channel>`` shows, a later ``<channel|>`` may still make all of it reasoning."""
    request = ParseRequest()
    parser = GEMMA4(request, state=GEMMA4.start_state(request, None))
    assert not parser.feed("an answer without markers")
    assert "an answer without markers" in json.dumps(parser.to_state())
    assert parser.feed("<|channel>r<channel|>").content == "an answer without markers"


@pytest.mark.parametrize(("text", "want"), [
    ("Let me check. \n<start_function_call>call:search{query:<escape>q<escape>,k:5}<end_function_call>",
     (None, "Let me check.", [("search", '{"query": "q", "k": 5}')])),
    ("no calls  \n", (None, "no calls  \n", [])),
    ("a <start_function_call>call:bad name{}<end_function_call>", (None, "a <start_function_call>call:bad name{}"
                                                                    "<end_function_call>", [])),
])  # fmt: skip
def test_functiongemma_decides_at_the_end(text, want):
    factory = build_parser_factory(None, "functiongemma", vocab=VOCAB, enable_auto_tools=True, special_tokens=SPECIAL)
    request = ParseRequest(tools=TOOLS)
    assert one_shot(factory, request, text, None) == want
    assert same_answer(streamed(factory, request, text, list(range(0, len(text), 2)), None), want)


NS = "]<]minimax[>["
M3_BLOCK = f'{NS}<tool_call>\n{NS}<invoke name="search">{NS}<k>5{NS}</k>{NS}<k>6{NS}</k>{NS}</invoke>\n{NS}</tool_call>'


@pytest.mark.parametrize(("kwargs", "text", "want"), [
    ({}, "</mm:think>a</mm:think>", (None, "a</mm:think>", [])),  # a leading stray closer only
    ({}, "a<mm:think>r</mm:think>b", ("r", "ab", [])),
    ({"thinking_mode": "enabled"}, "r</mm:think>b", ("r", "b", [])),
    ({"thinking_mode": "enabled"}, "x</mm:think>y<mm:think>r", ("r", "x</mm:think>y", [])),  # held to the end
    ({}, "pre" + M3_BLOCK + "post", (None, "pre", [("search", '{"k": [5, 6]}')])),
])  # fmt: skip
def test_minimax_m3(kwargs, text, want):
    factory = build_parser_factory("minimax_m3", "minimax_m3", vocab=VOCAB, enable_auto_tools=True,
                                   special_tokens=SPECIAL)  # fmt: skip
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "k": {"type": "array", "items": {"type": "integer"}}}}}}]  # fmt: skip
    request = ParseRequest(tools=tools, chat_template_kwargs=kwargs)
    assert one_shot(factory, request, text, None) == want
    for step in (1, 4):
        assert same_answer(streamed(factory, request, text, list(range(0, len(text), step)), None), want)
