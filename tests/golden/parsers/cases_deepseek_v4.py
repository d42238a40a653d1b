"""DeepSeek V4 outputs: ``deepseek_v4`` reasoning and tools (DSML
``tool_calls`` blocks), the V3 group's shapes (cases_deepseek_v3.py) with V4's
spellings, V4.1's and V3's markers as strays."""

from __future__ import annotations

import random

import cases_deepseek_v3 as v3
from family_cases import Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    ("deepseek_v4", "deepseek_v4"),
    ("deepseek_v4", None),
    (None, "deepseek_v4"),
    ("deepseek_r1", "deepseek_v4"),  # a legacy composition
    ("deepseek_v4", "hermes"),
]
TOKENS, TOOLS, REQUESTS, PROMPTS = v3.TOKENS, v3.TOOLS, v3.REQUESTS, v3.PROMPTS

BENCH = ("deepseek_v4", "deepseek_v4", '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="search">\n'
         '<｜DSML｜parameter name="query" string="true">derender streaming</｜DSML｜parameter>\n'
         '<｜DSML｜parameter name="k" string="false">5</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>')


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = v3.reasoning(rng)
    pieces.append(rng.choice(["", "\n\n", "Sure. ", "  \n", "中文 ", words(rng, v3.WORDS)]))
    for _ in range(rng.choice([0, 1, 1, 1, 2])):
        block = v3.dsml_block(rng, rng.choice(["v4", "v4", "v4", "v41"]), rng.randint(0, 3))
        if rng.random() < 0.2:  # the opener's other spellings vLLM accepts (DSML_TOOL_START_VARIANTS)
            block = block.replace("<｜DSML｜tool_calls>", rng.choice(["<｜DSML｜toolcalls>", "<｜DSML｜tool>"]))
        pieces.append(block)
        pieces.append(rng.choice(["", "\n", " ", "\n\n", " after"]))
    if rng.random() < 0.25:
        pieces.append(rng.choice(["<think>", "</think>", "<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>",
                                  '<｜DSML｜invoke name="', '">', "</｜DSML｜invoke>", "<｜end▁of▁sentence｜>",
                                  "<tool_call>", v3.CALLS_BEGIN, ["spell", "<｜DSML｜tool_calls>"]]))
    pieces.append(rng.choice(["", " tail", "\n", words(rng, v3.WORDS)]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


def _calls(*invokes: str) -> str:
    return "<｜DSML｜tool_calls>\n" + "".join(invokes) + "</｜DSML｜tool_calls>"


def _inv(name: str, params: str) -> str:
    return f'<｜DSML｜invoke name="{name}">\n{params}</｜DSML｜invoke>\n'


def _p(key: str, value: str, string: str = "true") -> str:
    return f'<｜DSML｜parameter name="{key}" string="{string}">{value}</｜DSML｜parameter>\n'


CITY = v3.CITY
HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], ["r</think>Hello"], ["<think>r</think>\n\nHello"],
    # vLLM's tests/tool_parsers/test_deepseekv4_tool_parser.py and tests/parser/ shapes
    ["r</think>Let me check. ", _calls(_inv("get_weather", _p("city", "杭州") + _p("days", "5", "false")))],
    ["r</think>", _calls(_inv("get_weather", _p("city", "A")), _inv("search", _p("query", "q"))), " after"],
    ["r</think>", _calls(_inv("get_weather", _p("city", "a") + _p("city", "b")))],
    ["r</think>", _calls(_inv("run", _p("arguments", '{"input": "x"}', "false")))],
    ["r</think>", _calls(_inv("get_weather", _p("opts", '{"n": 4}', "false") + _p("tags", '["a"]', "false")))],
    ["r</think>", _calls(_inv("get_weather", '<｜DSML｜parameter name="days">3</｜DSML｜parameter>\n'))],
    ["r</think>", '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" '
                  'string="true">open'],
    ["reasoning <｜DSML｜tool_calls>", _inv("search", _p("query", "q")), "</｜DSML｜tool_calls>"],
    ["r</think>", _inv("search", _p("query", "q"))],  # an invoke without the block
    ["r</think>", "<｜DSML｜toolcalls>\n", _inv("search", _p("query", "q")), "</｜DSML｜tool_calls>"],
    ["r</think>ok ", "<｜DSML｜tool>", _inv("noargs", ""), "</｜DSML｜tool_calls>", " after"],
    ["r</think>", _calls(_inv("noargs", ""))],
    ["r</think>", _calls(_inv("", _p("query", "q")))],
    ["r</think>x</think>y<think>z"],
    ["r", ["spell", "</think>"], "\n\nspelled end"],
    ["r</think>", ["spell", "<｜DSML｜tool_calls>"], _inv("search", _p("query", "q")), "</｜DSML｜tool_calls>"],
    ["r</think>  ", _calls(_inv("search", _p("query", "a\nb"))), "\n\ntext after"],
    ["<think>", "plan", "</think>", "\n\n", _calls(_inv("get_weather", _p("city", 'quote " and \\ back'))),
     "<｜end▁of▁sentence｜>"],
]
