"""PLaMo 3's token-level rules (families/plamo3.py), beside its vLLM fixture.

``Plamo3Parser._strip_unfinished_marker`` compares token ids, so the family
is built with the tokenizer's encoder; without one it cuts nothing.  The
cut applies to a whole field (reasoning, the tool pass's content), as
vLLM's, not only to a truncated output's end.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).parents[1] / "golden" / "parsers"))

import family_tokens

from derender_queue.core.parsers import ParseRequest
from derender_queue.core.parsers.deltas import DeltaAccumulator
from derender_queue.core.parsers.factory import build_parser_factory
from derender_queue.core.vocab import load_vocab

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
REQS, END_REQS = "<|plamo:begin_tool_requests:plamo|>", "<|plamo:end_tool_requests:plamo|>"
REQ, END_REQ = "<|plamo:begin_tool_request:plamo|>", "<|plamo:end_tool_request:plamo|>"
NAME, END_NAME = "<|plamo:begin_tool_name:plamo|>", "<|plamo:end_tool_name:plamo|>"
ARGS = "<|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>"
END_ARGS = "<|plamo:end_tool_arguments:plamo|>"


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    return load_vocab(family_tokens.build("plamo3", tmp_path_factory.mktemp("plamo3")))


def parse(vocab, text: str, reasoning: str | None = "plamo3", encode: bool = True) -> DeltaAccumulator:
    factory = build_parser_factory(
        reasoning, "plamo3", vocab=vocab.token_to_id, enable_auto_tools=True,
        special_tokens=[vocab.pieces[i] for i in sorted(vocab.special_ids)],
        encode=(lambda s: vocab.tokenizer.encode(s, add_special_tokens=False).ids) if encode else None,
    )  # fmt: skip
    assert factory is not None
    parser = factory(ParseRequest(tools=TOOLS), whole=True)
    acc = DeltaAccumulator()
    acc.add(parser.feed(text))
    acc.add(parser.finish())
    return acc


@pytest.mark.parametrize(
    ("tail", "cut"),
    [("<|plamo:end_think", True), ("<|plamo:end_", True), ("<|plamo:end_thi", False), ("<|plamo:end_think:pla", False)],
)
def test_an_unfinished_marker_is_cut_by_its_token_ids(vocab, tail, cut):
    # "think" is one token of the test tokenizer, "thi" another: only whole marker tokens are a prefix.
    got = parse(vocab, "plan " + tail)
    assert got.reasoning == ("plan " if cut else "plan " + tail)
    assert parse(vocab, "plan " + tail, encode=False).reasoning == "plan " + tail


def test_a_call_name_and_arguments_lose_an_unfinished_marker(vocab):
    got = parse(vocab, f"r<|plamo:end_think:plamo|>{REQS}{REQ}{NAME}get_weather<|plamo:end_")
    assert [c["function"]["name"] for c in got.tool_calls] == ["get_weather"]
    got = parse(vocab, f'{REQS}{REQ}{NAME}get_weather{END_NAME}{ARGS}{{"a": 1}}<|plamo:end_tool_argu', None)
    assert [c["function"]["arguments"] for c in got.tool_calls] == ['{"a": 1}']


def test_arguments_after_a_request_end_join_its_call(vocab):
    call = f'{REQS}{REQ}{NAME}get_weather{END_NAME}{ARGS}{{"a": 1}}{END_ARGS}{END_REQ}'
    text = call + f'{ARGS}{{"b": 2}}{END_ARGS}{END_REQS}'
    got = parse(vocab, text, None)
    assert [c["function"]["arguments"] for c in got.tool_calls] == ['{"a": 1}{"b": 2}']


def test_an_unfinished_marker_is_cut_from_the_whole_field(vocab):
    # A later terminal leaves it at the end of the reasoning; vLLM cuts it from the joined field.
    assert parse(vocab, "plan<|plamo:begin_<|plamo:end_think:plamo|>answer").reasoning == "plan"
    assert parse(vocab, "r<|plamo:end_think:plamo|>x<|plamo:begin_<|plamo:tag|>").content == "x"
    call = f"{REQS}{REQ}{NAME}get_weather{END_NAME}{ARGS}{{}}{END_ARGS}{END_REQ}"
    # Before a call that is sent, the content ends at the call ...
    assert parse(vocab, f"r<|plamo:end_think:plamo|>x<|plamo:begin_{call}").content == "x"
    # ... but a call never sent (no arguments, no request end) leaves one field with the text after.
    unsent = f"{REQS}{REQ}{NAME}get_weather{END_NAME}{END_REQS} after"
    assert parse(vocab, f"r<|plamo:end_think:plamo|>x<|plamo:begin_{unsent}").content == "x<|plamo:begin_ after"


def test_a_legacy_composition_keeps_the_piece_without_calls(vocab):
    # deepseek_r1 in front: vLLM answers the raw content when no call is made, the engine's when one is.
    assert parse(vocab, "<think>r</think>answer <|plamo:end_", "deepseek_r1").content == "answer <|plamo:end_"
    call = f"{REQS}{REQ}{NAME}get_weather{END_NAME}{ARGS}{{}}{END_ARGS}{END_REQ}"
    assert parse(vocab, f"<think>r</think>x<|plamo:begin_{call}", "deepseek_r1").content == "x"
