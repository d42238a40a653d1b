"""The parser engine's own promises (derender_queue/core/parsers/engine).

* Chunking and state round-trips never change a result: for random outputs
  built from a family's markup fragments, folding the deltas of any chunking,
  with the parser rebuilt from ``json.loads(json.dumps(to_state()))`` at
  every boundary, equals the one-shot ``parse_message`` (but for the one
  documented exception, ``same_answer``).
* The lexer gives one feed's tokens for any chunking, also when one literal is
  a prefix of another, and refuses literals it could not hold back for.
* A grammar whose call text could change after the engine sent it is refused.
* The state stays small while nothing is undecided (quoted in bytes), also
  for content that starts with whitespace while a call may still follow: it
  is streamed, and only its leading whitespace differs from the non-streaming
  answer when a call follows (docs/parsers.md, "held content").
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from derender_queue.core.parsers import DeltaAccumulator, ParseRequest, build_parser_factory, parse_message
from derender_queue.core.parsers.engine.family import Family
from derender_queue.core.parsers.engine.grammar import Event, Grammar, State, Transition
from derender_queue.core.parsers.lexer import LiteralLexer
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
    """``Family.strip_tool_names`` (Glm47MoeParser._emit_name_delta): GLM's
    name runs up to the first ``<arg_key>``, newline included; the stripped
    name is what vLLM validates, so the call is announced and the text after
    it dropped."""
    factory, request = GLM_FACTORIES[0], ParseRequest.from_body({"tools": TOOLS})
    text = "r</think>Hello <tool_call>search\n<arg_key>query</arg_key>\n<arg_value>q</arg_value>\n</tool_call> after"
    assert one_shot(factory, request, text, None) == ("r", "Hello", [("search", '{"query": "q"}')])
    assert streamed(factory, request, text, list(range(0, len(text), 3)), None)[1:] == ("Hello", [
        ("search", '{"query": "q"}')])


def test_a_family_can_have_a_grammar_for_thinking_off():
    """``Family.grammar_without_thinking``: GLM's config with thinking off has
    no ``<think>`` terminals, so its tool pass keeps them as content text."""
    factory = GLM_FACTORIES[0]
    on, off = (ParseRequest.from_body({"tools": TOOLS, "chat_template_kwargs": {"thinking": t}}) for t in (True, False))
    assert one_shot(factory, on, "r</think>Hi </think>x", None) == ("r", "Hi x", [])
    assert one_shot(factory, off, "r</think>Hi </think>x", None) == (None, "r</think>Hi </think>x", [])
    assert streamed(factory, off, "r</think>Hi </think>x", [1, 5, 12], None) == (None, "r</think>Hi </think>x", [])


def test_a_forced_tool_choice_reads_json_where_vllm_keeps_supports_required_and_named():
    """``parsers/forced_json.py`` (Seed-OSS's tool parser has no structural
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
