"""Unit tests for the parser API: selection, request rules, streaming shape,
minimal hold-back and bounded state."""

from __future__ import annotations

import json

import pytest

from derender_queue.core.parsers import (
    ParseRequest,
    ParserInputError,
    build_parser_factory,
    hides_token_metadata,
    parse_message,
    resolve_chat_template_kwargs,
    resolve_finish_reason,
)

D = "｜DSML｜"
VOCAB = {"<think>": 128821, "</think>": 128822}
SPECIAL = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"]
TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}, "k": {"type": "integer"}}}}}]


def factory(reasoning="deepseek_v4", tool="deepseek_v4", auto=True):
    return build_parser_factory(
        reasoning, tool, vocab=VOCAB, enable_auto_tools=auto, special_tokens=SPECIAL
    )


def state_size(parser) -> int:
    return len(json.dumps(parser.to_state()))


# ── selection ────────────────────────────────────────────────────────


def test_unknown_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown reasoning parser"):
        factory("no_such_parser", None)
    with pytest.raises(ValueError, match="unknown tool parser"):
        factory(None, "no_such_parser")


def test_no_parser_without_reasoning_or_auto_tools() -> None:
    assert factory(None, None) is None
    # vLLM builds no tool parser without --enable-auto-tool-choice.
    assert factory(None, "hermes", auto=False) is None
    assert factory("deepseek_r1", "hermes", auto=False).spec.tool_parser is None


def test_r1_needs_think_tokens_in_vocab() -> None:
    with pytest.raises(ValueError, match="think start/end"):
        build_parser_factory("deepseek_r1", None, vocab={}, enable_auto_tools=False)


# ── request rules ────────────────────────────────────────────────────


def test_tool_choice_defaults_like_vllm() -> None:
    assert ParseRequest().tool_choice == "none"
    assert ParseRequest(tools=TOOLS).tool_choice == "auto"
    assert ParseRequest.from_body({"tools": TOOLS}).tool_choice == "auto"
    assert ParseRequest.from_body({"tools": TOOLS, "tool_choice": None}).tool_choice is None


def test_named_tool_choice_must_match_a_tool() -> None:
    with pytest.raises(ParserInputError) as exc:
        ParseRequest(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "x"}})
    assert str(exc.value) == (
        "The tool specified in `tool_choice` does not match any of the specified `tools`"
    )
    assert exc.value.parameter == "tool_choice"
    assert isinstance(exc.value, ValueError)


def test_chat_template_kwargs_resolution() -> None:
    kw = resolve_chat_template_kwargs({"reasoning_effort": "none"})
    assert kw["enable_thinking"] is False and kw["reasoning_effort"] == "none"
    # Request-level fields override the request's chat_template_kwargs ...
    kw = resolve_chat_template_kwargs(
        {"chat_template_kwargs": {"add_generation_prompt": False}}
    )
    assert kw["add_generation_prompt"] is True
    # ... server defaults never override the request.
    kw = resolve_chat_template_kwargs(
        {"chat_template_kwargs": {"thinking": False}},
        default_chat_template_kwargs={"thinking": True, "x": 1},
    )
    assert kw["thinking"] is False and kw["x"] == 1


def test_thinking_flag_selects_initial_state() -> None:
    f = factory()
    on = parse_message(f, ParseRequest(), "abc", [], "stop")
    off = parse_message(
        f, ParseRequest(chat_template_kwargs={"thinking": False}), "abc", [], "stop"
    )
    assert (on.reasoning, on.content) == ("abc", None)
    assert (off.reasoning, off.content) == (None, "abc")


def test_finish_reason_and_metadata_hiding() -> None:
    named = ParseRequest(
        tools=TOOLS, tool_choice={"type": "function", "function": {"name": "search"}}
    )
    assert resolve_finish_reason("stop", ParseRequest(tools=TOOLS), True) == "tool_calls"
    assert resolve_finish_reason(None, ParseRequest(tools=TOOLS), True) == "tool_calls"
    assert resolve_finish_reason("length", ParseRequest(tools=TOOLS), True) == "length"
    assert resolve_finish_reason("stop", named, True) == "stop"
    f = factory()
    assert hides_token_metadata(f, ParseRequest(include_reasoning=False))
    assert not hides_token_metadata(f, ParseRequest())
    assert not hides_token_metadata(None, ParseRequest(include_reasoning=False))


# ── streaming shape and hold-back ────────────────────────────────────


def test_v4_tool_header_streams_before_arguments() -> None:
    parser = factory()(ParseRequest(tools=TOOLS, chat_template_kwargs={"thinking": False}))
    d1 = parser.feed(f'Hi <{D}tool_calls>\n<{D}invoke name="search">', [])
    assert d1.content == "Hi "
    [header] = d1.tool_calls
    assert header.index == 0 and header.name == "search" and header.arguments is None
    assert header.to_openai()["type"] == "function"
    d2 = parser.feed(
        f'<{D}parameter name="k" string="false">3</{D}parameter></{D}invoke>', []
    )
    assert [tc.arguments for tc in d2.tool_calls] == ['{"k": 3}']
    assert d2.tool_calls[0].to_openai() == {"index": 0, "function": {"arguments": '{"k": 3}'}}
    assert not parser.finish()


@pytest.mark.parametrize(
    ("config", "chunk", "field", "emitted"),
    [
        (("deepseek_v4", "deepseek_v4"), "Hello <｜DS", "content", "Hello "),
        (("deepseek_v4", "deepseek_v4"), "Hello \"", "content", "Hello "),
        (("deepseek_v4", None), "Hello </thi", "content", "Hello "),
        (("deepseek_r1", "hermes"), "<think>abc</thi", "reasoning", "abc"),
        (("deepseek_r1", "hermes"), "<think>r</think>Hi <tool_", "content", "Hi "),
        ((None, "hermes"), "Hi <tool_", "content", "Hi "),
    ],
)
def test_only_a_possible_marker_prefix_is_held(config, chunk, field, emitted) -> None:
    kwargs = {"thinking": False}
    parser = factory(*config)(ParseRequest(tools=TOOLS, chat_template_kwargs=kwargs))
    assert getattr(parser.feed(chunk, []), field) == emitted


def test_misuse_raises() -> None:
    parser = factory()(ParseRequest())
    parser.finish()
    with pytest.raises(RuntimeError):
        parser.feed("x", [])
    with pytest.raises(RuntimeError):
        parser.finish()
    with pytest.raises(ValueError):
        factory()(ParseRequest(), state={"v": 0})


# ── bounded state ────────────────────────────────────────────────────


def test_v4_state_stays_small_over_long_outputs() -> None:
    parser = factory()(ParseRequest(tools=TOOLS))
    sizes = []
    for i in range(2000):  # ~100k chars of reasoning
        parser.feed(f"thought {i} about things, ", [])
        sizes.append(state_size(parser))
    parser.feed("</think>Answer. ", [])
    call = (
        f'<{D}invoke name="search">\n<{D}parameter name="q" string="true">'
        f"{'x' * 200}</{D}parameter>\n</{D}invoke>\n"
    )
    parser.feed(f"<{D}tool_calls>\n", [])
    for _ in range(200):  # 200 complete calls
        parser.feed(call, [])
        sizes.append(state_size(parser))
    assert max(sizes) < 600, max(sizes)


def test_hermes_state_is_bounded_once_the_outcome_is_known() -> None:
    parser = factory("deepseek_r1", "hermes")(ParseRequest(tools=TOOLS))
    parser.feed("<think>" + "r" * 50_000, [])
    assert state_size(parser) < 400  # inside <think>: only a marker prefix
    parser.feed("</think>text <tool_call>{not json}</tool_call>", [])
    for _ in range(1000):
        parser.feed("more content " * 10, [])
    assert state_size(parser) < 400  # failed calls: plain content from now on


def test_undecided_sections_are_held_and_documented() -> None:
    # vLLM's non-streaming rules decide these only at the end (see r1.py and
    # hermes.py): markerless deepseek_r1 text and a hermes tool section.
    r1 = factory("deepseek_r1", None)(ParseRequest())
    assert not r1.feed("reasoning without an opening tag</think>answer", [])
    final = r1.finish()
    assert (final.reasoning, final.content) == (
        "reasoning without an opening tag", "answer",
    )
    hermes = factory(None, "hermes")(ParseRequest(tools=TOOLS))
    d = hermes.feed('ok <tool_call>{"name": "search", "arguments": {"q": "z"}}</tool_call>', [])
    assert d.content == "ok " and not d.tool_calls
    [tc] = hermes.finish().tool_calls
    assert (tc.name, tc.arguments) == ("search", '{"q": "z"}')


def test_pythonic_output_that_cannot_be_calls_streams_and_a_list_is_held() -> None:
    """pythonic.py: only output starting with "[" (Llama 4: or
    <|python_start|>) can be calls; it is held to the end, the rest streams."""
    from derender_queue.core.parsers import ParseRequest, build_parser_factory

    body = {"tools": [{"type": "function", "function": {"name": "search"}}]}
    for name in ("pythonic", "llama4_pythonic"):
        factory = build_parser_factory(None, name, vocab={}, enable_auto_tools=True)
        assert factory is not None
        parser = factory(ParseRequest.from_body(body))
        assert parser.feed("Sure, ").content == "Sure, "
        parser = factory(ParseRequest.from_body(body))
        assert not parser.feed('[search(query="q")').tool_calls
        done = parser.feed("]")
        done.extend(parser.finish())
        assert [(c.name, c.arguments) for c in done.tool_calls] == [("search", '{"query": "q"}')]


@pytest.mark.parametrize(("text", "want"), [
    ("pre Here is my thought process: plan Here's my response: answer", (" plan ", " answer")),
    ("Here is my thought process: plan", (None, "Here is my thought process: plan")),
    ("Here is my thought process:Here is my response:", ("", None)),
    ("", (None, "")),
])  # fmt: skip
def test_granite_reasoning_is_decided_by_the_response_marker(text, want) -> None:
    """granite_reasoning.py: held until a response marker follows a
    thought-process marker, at any chunking."""
    from derender_queue.core.parsers import DeltaAccumulator, ParseRequest, build_parser_factory

    factory = build_parser_factory("granite", None, vocab={}, enable_auto_tools=False)
    assert factory is not None
    for size in (1, 3, len(text) or 1):
        acc = DeltaAccumulator()
        parser = factory(ParseRequest.from_body({}))
        for i in range(0, len(text), size):
            acc.add(parser.feed(text[i : i + size]))
        acc.add(parser.finish())
        assert (acc.reasoning, acc.content) == want


def test_phi4_mini_json_holds_the_output_a_later_match_would_drop() -> None:
    """phi4_mini.py: a functools[...] anywhere makes the content None, so
    nothing is sent before the end."""
    from derender_queue.core.parsers import ParseRequest, build_parser_factory

    factory = build_parser_factory(None, "phi4_mini_json", vocab={}, enable_auto_tools=True)
    assert factory is not None
    parser = factory(ParseRequest.from_body({"tools": [{"type": "function", "function": {"name": "search"}}]}))
    assert not parser.feed("Sure. ")
    done = parser.feed('functools[{"name": "search", "arguments": {"q": 1}}]')
    done.extend(parser.finish())
    assert done.content is None and [(c.name, c.arguments) for c in done.tool_calls] == [("search", '{"q": 1}')]


@pytest.mark.parametrize(("block", "want"), [
    ("get_weather\n<arg_key>c</arg_key>", ("get_weather", "<arg_key>c</arg_key>")),
    ("  get weather  ", ("get weather", None)),
    ("   ", ("", None)),  # vLLM 0.34's pattern takes the last blank as the name
    (" \n\n", ("", None)),
    ("\n\n", None),
    ("", None),
    ("a\nb", None),
    ("name\nnot args<arg_key>k</arg_key>", None),
    ("a<tool_call>b\n<arg_key>k</arg_key>", ("b", "<arg_key>k</arg_key>")),  # searched on to an inner tag
    ("\t\x1c x \n\n", ("x", None)),  # \x1c is no blank to the pattern, but str.strip drops it
    (" " * 5000 + "<x", None),  # no backtracking over the blank run
])  # fmt: skip
def test_poolside_v1_reads_a_call_head_as_vllms_pattern_does(block, want) -> None:
    """poolside_v1.py: ``func_detail_regex`` by hand (checked against the
    `regex` module's answers on 200k random blocks)."""
    from derender_queue.core.parsers.poolside_v1 import _head_of_block

    assert _head_of_block(block) == want


def test_poolside_v1_converts_by_schema_and_fails_to_the_text() -> None:
    """poolside_v1.py: values by the request's schema (schema_types.py);
    a value whose JSON fails makes the whole output the content."""
    from derender_queue.core.parsers import DeltaAccumulator, ParseRequest, build_parser_factory

    with pytest.raises(ValueError, match="<assistant>"):
        build_parser_factory("poolside_v1", None, vocab={}, enable_auto_tools=False)
    factory = build_parser_factory(None, "poolside_v1", vocab={}, enable_auto_tools=True)
    assert factory is not None
    tools = [{"type": "function", "function": {"name": "w", "parameters": {"type": "object", "properties": {
        "s": {"type": "string"}, "n": {"$ref": "#/$defs/N"}, "o": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
        "$defs": {"N": {"type": "integer"}}}}}]  # fmt: skip

    def run(text: str) -> DeltaAccumulator:
        acc = DeltaAccumulator()
        parser = factory(ParseRequest.from_body({"tools": tools}))
        for ch in text:
            acc.add(parser.feed(ch))
        acc.add(parser.finish())
        return acc

    kv = "<arg_key>{}</arg_key><arg_value>{}</arg_value>".format
    acc = run("Hi <tool_call>w\n" + kv("s", " 1 ") + kv("n", " 2 ") + kv("o", "None") + kv("x", "(1, 'a')")
              + "</tool_call> dropped")  # fmt: skip
    assert acc.content == "Hi "
    assert [c["function"]["arguments"] for c in acc.tool_calls] == ['{"s": " 1 ", "n": 2, "o": null, "x": [1, "a"]}']
    text = "<tool_call>w" + kv("x", "{1, 2}") + "</tool_call>"
    acc = run(text)
    assert (acc.content, acc.tool_calls) == (text, [])
