"""DeepSeek V3 group outputs: ``deepseek_v3`` reasoning (R1 or identity),
``deepseek_v41`` reasoning and tools (spaced DSML), ``deepseek_v32`` tools
(DSML ``function_calls``), ``deepseek_v3`` / ``deepseek_v31`` tools (the
``<｜tool▁calls▁begin｜>`` tokens), and their malformed shapes."""

from __future__ import annotations

import json
import random
from typing import Any

from family_cases import Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    ("deepseek_v41", "deepseek_v41"),
    ("deepseek_v41", None),
    (None, "deepseek_v41"),
    (None, "deepseek_v32"),
    ("deepseek_v3", "deepseek_v3"),
    ("deepseek_v3", "deepseek_v31"),
    ("deepseek_v3", None),
    (None, "deepseek_v31"),
    ("deepseek_r1", "deepseek_v41"),  # a legacy composition
    ("deepseek_v3", "deepseek_v32"),
]

# The test tokenizer is DeepSeek V4's as it is: <think>, </think>, ｜DSML｜, <｜User｜>, <｜Assistant｜> and
# the <｜tool▁...｜> tokens are its added tokens; BOS/EOS its special ones.
TOKENS: dict[str, list[str]] = {"special": [], "added": []}

BENCH = ("deepseek_v41", "deepseek_v41", '<｜DSML｜ calls>\n<｜DSML｜ invoke name="search">\n'
         '<｜DSML｜ parameter name="query" string="true">derender streaming</｜DSML｜ parameter>\n'
         '<｜DSML｜ parameter name="k" string="false">5</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>')

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "unit": {"type": "string", "enum": ["c", "f"]},
        "detail": {"type": ["boolean", "null"]}, "tags": {"type": "array", "items": {"type": "string"}},
        "opts": {"type": "object", "properties": {"n": {"type": "integer"}}}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "k": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "noargs"}},
    {"type": "function", "function": {"name": "run", "parameters": {"type": "object", "properties": {
        "input": {"type": "string"}}}}},
]  # fmt: skip

# deepseek_v3's reasoning parser thinks only when asked (default off), deepseek_v41's unless told not to.
REQUESTS: list[dict[str, Any]] = [
    {"tools": TOOLS, "chat_template_kwargs": {"thinking": True}},
    {"chat_template_kwargs": {"enable_thinking": True}},
    {"tools": TOOLS, "chat_template_kwargs": {"thinking": False}},
    {"tools": TOOLS, "chat_template_kwargs": {"thinking": True}, "tool_choice": "required"},
]

BOS, USER, ASSISTANT = "<｜begin▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"
PROMPTS = [
    f"{BOS}{USER}weather?{ASSISTANT}",
    f"{BOS}{USER}weather?{ASSISTANT}<think>",
    f"{BOS}{USER}weather?{ASSISTANT}</think>",
    f"{BOS}{USER}hi{ASSISTANT}<think>r</think>ok<｜end▁of▁sentence｜>{USER}weather?{ASSISTANT}",
    "",
]

WORDS = ["hello", " world", "世界", "😀", " ", "\n", "\t", "x", '"', ">", "<", "{", "}", " answer: 42",
         "éß", "\u00a0", "\\", " = ", "/", "```", "｜"]  # fmt: skip
NAMES = ["get_weather", "search", "noargs", "run", "unknown_tool", "", " search ", "get weather"]
KEYS = ["city", "days", "unit", "detail", "tags", "opts", "query", "k", "input", "arguments", "x", ""]
VALUES = ["Paris", "杭州", "5", " 7 ", "1.5", "true", "null", "c", '["a", "b"]', '{"n": "4"}', "a\nb", "",
          'quote " and \\ back', "😀", "{bad", "<b>", "a>b", '{"city": "Rome"}', '{"query": "q", "k": 2}']  # fmt: skip

DSML = {  # variant -> (block open spellings, block close, tag prefix)
    "v41": (["<｜DSML｜ calls>", "<｜DSML｜ tool_calls>"], "</｜DSML｜ calls>", "｜DSML｜ "),
    "v32": (["<｜DSML｜function_calls>"], "</｜DSML｜function_calls>", "｜DSML｜"),
    "v4": (["<｜DSML｜tool_calls>"], "</｜DSML｜tool_calls>", "｜DSML｜"),
}
CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"


def dsml_param(rng: random.Random, d: str) -> str:
    string = rng.choice([' string="true"', ' string="true"', ' string="false"', "", ' string="x"'])
    close = rng.choice([f"</{d}parameter>", f"</{d}parameter>", f"</{d}parameter>", ""])
    return f'<{d}parameter name="{rng.choice(KEYS) or "k"}"{string}>{rng.choice(VALUES)}{close}\n'


def dsml_block(rng: random.Random, variant: str, calls: int) -> str:
    opens, close, d = DSML[variant]
    body = ""
    for _ in range(calls):
        params = "".join(dsml_param(rng, d) for _ in range(rng.randint(0, 3)))
        end = rng.choice([f"</{d}invoke>\n", f"</{d}invoke>\n", f"</{d}invoke>", ""])
        body += f'<{d}invoke name="{rng.choice(NAMES)}">\n{params}{end}'
    head = rng.choice([*opens, *opens, ""]) + rng.choice(["\n", "", "\n"])
    return head + body + rng.choice([close, close, close + "\n", ""])


def json_args(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.7:
        args = {rng.choice(KEYS) or "k": rng.choice([1, "s", "é😀", None, True, "a\nb", [1, 2], {"n": 3}])
                for _ in range(rng.randint(0, 3))}
        return json.dumps(args, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, None, 2]))
    return rng.choice(["{bad", "", " ", "[1]", "{}\n```", '{"a": "```"}'])


def v3_block(rng: random.Random, variant: str, calls: int) -> str:
    body = ""
    for _ in range(calls):
        name = rng.choice(NAMES)
        if variant == "v3":
            kind = rng.choice(["function", "function", "function", "function", "func", ""])
            fence = rng.choice(["\n```json\n", "\n```json\n", "\n```json\n", "\n```\n", " "])
            tail = rng.choice(["\n```", "\n```", "```", ""])
            body += f"{CALL_BEGIN}{kind}{SEP}{name}{fence}{json_args(rng)}{tail}"
        else:
            body += f"{CALL_BEGIN}{name}{rng.choice([SEP, SEP, SEP, ''])}{json_args(rng)}"
        body += rng.choice([CALL_END, CALL_END, CALL_END, ""]) + rng.choice(["", "", "\n"])
    return rng.choice([CALLS_BEGIN, CALLS_BEGIN, CALLS_BEGIN, ""]) + body + rng.choice([CALLS_END, CALLS_END, ""])


def reasoning(rng: random.Random) -> list[Piece]:
    r = rng.random()
    body = words(rng, [*WORDS, "plan", " step"], 0, 5)
    end: Piece = rng.choice(["</think>", "</think>\n\n", "\n</think>\n\n", ["spell", "</think>"], ""])
    if r < 0.45:
        return [body, end]  # the template opened <think>
    if r < 0.75:
        return ["<think>", body, end]
    return []


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = reasoning(rng)
    pieces.append(rng.choice(["", "\n\n", "Sure. ", "  \n", "中文 ", words(rng, WORDS)]))
    variant = rng.choice(["v41", "v41", "v32", "v3", "v3", "v31", "v31", "v4"])
    for _ in range(rng.choice([0, 1, 1, 1, 2])):
        calls = rng.randint(0, 3)
        pieces.append(dsml_block(rng, variant, calls) if variant.startswith("v4") or variant == "v32"
                      else v3_block(rng, variant, calls))
        pieces.append(rng.choice(["", "\n", " ", "\n\n", " after"]))
    if rng.random() < 0.25:
        pieces.append(rng.choice(["<think>", "</think>", CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END, SEP,
                                  "<｜DSML｜ calls>", "</｜DSML｜ calls>", '<｜DSML｜ invoke name="', '">',
                                  "<｜DSML｜function_calls>", "<｜end▁of▁sentence｜>", "<｜User｜>",
                                  ["spell", CALLS_BEGIN], ["spell", "<｜DSML｜ calls>"]]))
    pieces.append(rng.choice(["", " tail", "\n", words(rng, WORDS)]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


def _v41(*invokes: str) -> str:
    return "<｜DSML｜ calls>\n" + "".join(invokes) + "</｜DSML｜ calls>"


def _inv41(name: str, params: str) -> str:
    return f'<｜DSML｜ invoke name="{name}">\n{params}</｜DSML｜ invoke>\n'


def _p41(key: str, value: str, string: str = "true") -> str:
    return f'<｜DSML｜ parameter name="{key}" string="{string}">{value}</｜DSML｜ parameter>\n'


def _v32(name: str, params: str) -> str:
    return (f'<｜DSML｜function_calls>\n<｜DSML｜invoke name="{name}">\n{params}</｜DSML｜invoke>\n'
            "</｜DSML｜function_calls>")


def _p32(key: str, value: str, string: str = "true") -> str:
    return f'<｜DSML｜parameter name="{key}" string="{string}">{value}</｜DSML｜parameter>\n'


def _v3call(name: str, args: str, kind: str = "function") -> str:
    return f"{CALL_BEGIN}{kind}{SEP}{name}\n```json\n{args}\n```{CALL_END}"


def _v31call(name: str, args: str) -> str:
    return f"{CALL_BEGIN}{name}{SEP}{args}{CALL_END}"


CITY = '{"city": "Paris"}'
HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], ["r</think>Hello"], ["<think>r</think>\n\nHello"],
    # V4.1 / V3.2 DSML (vLLM's tests/parser/test_deepseek_v41.py, test_deepseek_v32.py shapes)
    ["r</think>Let me check. ", _v41(_inv41("get_weather", _p41("city", "杭州") + _p41("days", "5", "false")))],
    ["r</think>", _v41(_inv41("get_weather", _p41("city", "A")), _inv41("search", _p41("query", "q"))), " after"],
    ["r</think>", _v41(_inv41("get_weather", _p41("city", "a") + _p41("city", "b")))],
    ["r</think>", _v41(_inv41("run", _p41("arguments", '{"input": "x"}', "false")))],
    ["r</think>", _v41(_inv41("get_weather", _p41("arguments", CITY, "false")),
                       _inv41("search", _p41("arguments", CITY, "false")))],
    ["r</think>", _v41(_inv41("get_weather", _p41("input", CITY)))],
    ["r</think>", _v41(_inv41("get_weather", '<｜DSML｜ parameter name="days">3</｜DSML｜ parameter>\n'))],
    ["r</think>", "<｜DSML｜ tool_calls>\n", _inv41("search", _p41("query", "q")), "</｜DSML｜ calls>"],
    ["r</think>", '<｜DSML｜ calls>\n<｜DSML｜ invoke name="get_weather">\n<｜DSML｜ parameter name="city" '
                  'string="true">open'],
    ["reasoning <｜DSML｜ calls>", _inv41("search", _p41("query", "q")), "</｜DSML｜ calls>"],  # ends reasoning
    ["r</think>", _inv41("search", _p41("query", "q"))],  # an invoke without the block
    ["r</think>", _v41(_inv41("", '{"name": "search", "arguments": {"query": "q"}}'))],
    ["r</think>", _v41(_inv41("noargs", ""))],
    ["r</think>x</think>y<think>z"],
    ["r", ["spell", "</think>"], "\n\nspelled end"],
    ["<think>plan</think>", _v32("get_weather", _p32("city", "Paris") + _p32("days", "2", "false"))],
    [_v32("run", _p32("arguments", '{"input": "x"}', "false")), "\nafter"],
    # DeepSeek V3 / V3.1 (vLLM's tests/tool_parsers/test_deepseekv3*_tool_parser.py shapes)
    ["Let me check. ", CALLS_BEGIN, _v3call("get_weather", CITY), CALLS_END],
    [CALLS_BEGIN, _v3call("get_weather", CITY), "\n", _v3call("search", '{\n  "query": "q"\n}'), CALLS_END, " tail"],
    [CALLS_BEGIN, _v3call("get_weather", CITY, "func"), CALLS_END],
    [CALLS_BEGIN, _v3call("get_weather", CITY)],
    ["  ", CALLS_BEGIN, CALLS_END, "  "],
    [CALLS_END, "a", CALLS_BEGIN, _v3call("search", "{}"), "b"],
    ["Sure ", CALLS_BEGIN, _v31call("get_weather", CITY), _v31call("search", '{"query": "q"}'), CALLS_END, " x"],
    [CALLS_BEGIN, _v31call("get_weather", CITY)],
    [_v31call("get_weather", CITY), " before the section ", CALLS_BEGIN],
    ["<think>plan</think>\n\n", CALLS_BEGIN, _v31call("get_weather", CITY), CALLS_END, "<｜end▁of▁sentence｜>"],
    ["r</think>", ["spell", CALLS_BEGIN], _v31call("search", "{}"), CALLS_END],
]
