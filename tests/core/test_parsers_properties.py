"""Property tests: chunking and state round-trips never change the result.

For random outputs (built from marker fragments, so chunk boundaries land
inside ``<think>``, ``</tool_call>``, ``｜DSML｜`` ...) and random chunkings,
folding the streamed deltas must equal the one-shot ``parse_message``
result: reasoning, content (None vs "" included) and each tool call's name
and concatenated arguments.  In the round-trip variant the parser is
rebuilt from ``json.loads(json.dumps(parser.to_state()))`` at every chunk
boundary.  The deltas must also be well-formed OpenAI tool call fragments.

Example counts (``max_examples``): 400 for chunking, 300 for round-trips,
200 for structured DSML/Hermes outputs, 150 with one-character chunks, plus
a fixed char-by-char sweep of 8 configs x 9 requests x 9 samples; about
10 s on a 2-core machine.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from derender_queue.core.parsers import (
    DeltaAccumulator,
    ParseRequest,
    ParserFactory,
    build_parser_factory,
    parse_message,
)

D = "｜DSML｜"
EOS = "<｜end▁of▁sentence｜>"
VOCAB = {"<think>": 128821, "</think>": 128822}
SPECIAL = ["<｜begin▁of▁sentence｜>", EOS]
ID_RE = re.compile(r"^chatcmpl-tool-[0-9a-f]{16}$")

CONFIGS = [
    ("deepseek_r1", "hermes", True),
    ("deepseek_v4", "deepseek_v4", True),
    ("deepseek_r1", None, False),
    (None, "hermes", True),
    (None, "deepseek_v4", True),
    ("deepseek_v4", None, False),
    ("deepseek_r1", "deepseek_v4", True),
    ("deepseek_v4", "hermes", True),
]
FACTORIES: list[ParserFactory] = [
    f
    for r, t, a in CONFIGS
    if (f := build_parser_factory(r, t, vocab=VOCAB, enable_auto_tools=a, special_tokens=SPECIAL))
]

TOOLS = [
    {"type": "function", "function": {"name": "search", "parameters": {
        "type": "object",
        "properties": {"query": {"type": "string"}, "k": {"type": "integer"}},
    }}},
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"days": {"type": "integer"}},
    }}},
]
REQUESTS = [
    {},
    {"tools": TOOLS},
    {"tools": TOOLS, "tool_choice": "none"},
    {"tools": TOOLS, "tool_choice": "required"},
    {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "search"}}},
    {"tools": TOOLS, "tool_choice": None},
    {"tools": TOOLS, "parallel_tool_calls": False},
    {"tools": TOOLS, "include_reasoning": False},
    {"chat_template_kwargs": {"thinking": False}, "tools": TOOLS},
]

FRAGMENTS = [
    "<think>", "</think>", "<tool_call>", "</tool_call>",
    f"<{D}tool_calls>", f"</{D}tool_calls>", f"<{D}tool>", f'<{D}invoke name="',
    '">', f"</{D}invoke>", f"<{D}parameter", f"</{D}parameter>",
    ' name="query" string="true">', ' name="k" string="false">', EOS,
    "search", '{"name": "search", "arguments": {"query": "x"}}', '"name": "k"',
    "a", " ", "\n", "  ", "<", '"', ">", "｜", "思", "😀", "{", "}", "5",
]


def _param(name: str, value: str, string: str = "true") -> str:
    return f'<{D}parameter name="{name}" string="{string}">{value}</{D}parameter>'


STRUCTURED = [
    f'<{D}tool_calls>\n<{D}invoke name="search">\n' + _param("query", "q 思")
    + "\n" + _param("k", "3", "false") + f"\n</{D}invoke>\n</{D}tool_calls>",
    f'<{D}invoke name="">\n{{"name": "search", "arguments": {{"k": "2"}}}}\n</{D}invoke>',
    f'<{D}invoke name="get_weather">' + _param("arguments", '{"days": "4"}', "false"),
    '<tool_call>\n{"name": "search", "arguments": {"query": "é", "k": [1, 2.5]}}\n</tool_call>',
    '<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>',
    "<tool_call>{broken</tool_call>",
    "<think>plan</think>\n\n",
    "</think>  ",
]

texts = st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join)
# Outputs shaped like real turns: reasoning, prose, then calls.  Most of
# them make tool calls, which fragment soup rarely does.
structured_texts = st.tuples(
    st.sampled_from(["</think>", "<think>plan</think>\n", "</think>  \n", "pre ", ""]),
    st.sampled_from(["", "Sure, ", "思考 ", " "]),
    st.lists(st.sampled_from(STRUCTURED[:5]), min_size=1, max_size=3),
    st.lists(st.sampled_from(STRUCTURED + FRAGMENTS), max_size=3),
).map(lambda t: t[0] + t[1] + "\n".join(t[2]) + "".join(t[3]))


def one_shot(factory: ParserFactory, request: ParseRequest, text: str) -> dict[str, Any]:
    msg = parse_message(factory, request, text, [], "stop")
    return _summary(msg.reasoning, msg.content, msg.tool_calls)


def streamed(
    factory: ParserFactory,
    request: ParseRequest,
    text: str,
    cuts: list[int],
    *,
    round_trip: bool,
) -> dict[str, Any]:
    bounds = [0, *sorted({c % (len(text) + 1) for c in cuts}), len(text)]
    acc = DeltaAccumulator()
    deltas = []
    parser = factory(request)
    for start, end in itertools.pairwise(bounds):
        if round_trip:
            state = json.loads(json.dumps(parser.to_state()))
            parser = factory(request, state=state)
        deltas.append(parser.feed(text[start:end], list(range(start, end))))
    if round_trip:
        parser = factory(request, state=json.loads(json.dumps(parser.to_state())))
    deltas.append(parser.finish())
    for delta in deltas:
        acc.add(delta)
    _check_tool_deltas([tc for d in deltas for tc in d.tool_calls])
    return _summary(acc.reasoning, acc.content, acc.tool_calls)


def _summary(reasoning: str | None, content: str | None, calls: list[dict]) -> dict[str, Any]:
    return {
        "reasoning": reasoning,
        "content": content,
        "calls": [(c["function"]["name"], c["function"]["arguments"]) for c in calls],
    }


def _check_tool_deltas(tool_deltas: list) -> None:
    """Each call: one first fragment with id+name, then arguments only."""
    seen: list[int] = []
    for tc in tool_deltas:
        if tc.index not in seen:
            assert tc.index == len(seen), "indices start at 0 and grow by one"
            assert tc.id is not None and ID_RE.match(tc.id)
            assert tc.name
            seen.append(tc.index)
        else:
            assert tc.id is None and tc.name is None and tc.arguments is not None


def _settings(n: int):
    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        derandomize=True,
    )


@_settings(400)
@given(
    factory=st.sampled_from(FACTORIES),
    body=st.sampled_from(REQUESTS),
    text=texts,
    cuts=st.lists(st.integers(0, 10_000), max_size=12),
)
def test_chunking_does_not_change_result(factory, body, text, cuts) -> None:
    request = ParseRequest.from_body(body)
    assert streamed(factory, request, text, cuts, round_trip=False) == one_shot(
        factory, request, text
    )


@_settings(300)
@given(
    factory=st.sampled_from(FACTORIES),
    body=st.sampled_from(REQUESTS),
    text=texts,
    cuts=st.lists(st.integers(0, 10_000), max_size=12),
)
def test_state_round_trip_at_every_boundary(factory, body, text, cuts) -> None:
    request = ParseRequest.from_body(body)
    assert streamed(factory, request, text, cuts, round_trip=True) == one_shot(
        factory, request, text
    )


@_settings(200)
@given(
    factory=st.sampled_from(FACTORIES),
    body=st.sampled_from(REQUESTS),
    text=structured_texts,
    cuts=st.lists(st.integers(0, 10_000), max_size=20),
    round_trip=st.booleans(),
)
def test_structured_outputs_stream_consistently(factory, body, text, cuts, round_trip) -> None:
    request = ParseRequest.from_body(body)
    assert streamed(factory, request, text, cuts, round_trip=round_trip) == one_shot(
        factory, request, text
    )


@_settings(150)
@given(
    factory=st.sampled_from(FACTORIES),
    body=st.sampled_from(REQUESTS),
    text=st.one_of(texts, structured_texts),
)
def test_one_char_chunks(factory, body, text) -> None:
    """Every boundary at once: each marker is split at every position."""
    request = ParseRequest.from_body(body)
    cuts = list(range(len(text)))
    assert streamed(factory, request, text, cuts, round_trip=True) == one_shot(
        factory, request, text
    )


def test_char_by_char_everywhere() -> None:
    """Every boundary at once, for each structured sample and config."""
    for factory in FACTORIES:
        for body in REQUESTS:
            request = ParseRequest.from_body(body)
            for text in [*STRUCTURED, "".join(STRUCTURED)]:
                cuts = list(range(len(text)))
                assert streamed(factory, request, text, cuts, round_trip=True) == one_shot(
                    factory, request, text
                )
