"""K2 Horizon outputs: <ifm|think> reasoning (per reasoning effort), an
<ifm|tool_calls> group of XML, typed XML or JSON calls, and their malformed
shapes."""

from __future__ import annotations

import json
import random
from typing import Any

from family_cases import CONTENT, REASONING, Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    ("k2_horizon", "k2_horizon"),
    ("k2_horizon", None),
    (None, "k2_horizon"),
    ("deepseek_r1", "k2_horizon"),
]

THINK = {"high": ("<ifm|think>", "</ifm|think>"), "medium": ("<ifm|think_fast>", "</ifm|think_fast>"),
         "low": ("<ifm|think_faster>", "</ifm|think_faster>")}  # fmt: skip
G, GE, C, CE = "<ifm|tool_calls>", "</ifm|tool_calls>", "<ifm|tool_call>", "</ifm|tool_call>"
K, KE, T, TE, V, VE = ("<ifm|arg_key>", "</ifm|arg_key>", "<ifm|arg_type>", "</ifm|arg_type>", "<ifm|arg_value>",
                       "</ifm|arg_value>")  # fmt: skip
TOKENS = {"special": [], "added": [t for pair in THINK.values() for t in pair] + [G, GE, C, CE, K, KE, T, TE, V, VE]}

BENCH = ("k2_horizon", "k2_horizon", f"{G}{C}search{K}query{KE}{V}derender streaming{VE}{K}k{KE}{V}5{VE}{CE}{GE}")
BENCH_OUTPUT = ("<ifm|think>", REASONING, "</ifm|think>", CONTENT, BENCH[2])  # bench/stream.py

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "unit": {"type": "string", "enum": ["c", "f"]},
        "detail": {"type": ["boolean", "null"]}, "tags": {"type": "array", "items": {"type": "string"}},
        "opts": {"type": "object", "properties": {"n": {"type": "integer"}}}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "k": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "noargs"}},
]  # fmt: skip

REQUESTS: list[dict[str, Any]] = [
    {"tools": TOOLS, "chat_template_kwargs": {"tool_call_format": "json"}},
    {"tools": TOOLS, "chat_template_kwargs": {"tool_call_format": "xml_typed"}},
    {"tools": TOOLS, "chat_template_kwargs": {"reasoning_effort": "medium"}},
    {"tools": TOOLS, "chat_template_kwargs": {"reasoning_effort": "low", "tool_call_format": "json"}},
    {"chat_template_kwargs": {"tool_call_format": "xml"}},
]

PROMPTS = ["<｜begin▁of▁sentence｜>user: weather?\nassistant:", "<｜begin▁of▁sentence｜>user: weather?\nassistant:"
           "<ifm|think>", ""]  # fmt: skip

WORDS = ["hello", " world", "世界", "😀", " ", "\n", "\t", "x", '"', ">", "<", "{", "}", " answer: 42",
         "éß", "\u00a0", "\\", " = ", "/", "|"]  # fmt: skip
NAMES = ["get_weather", "search", "noargs", "unknown_tool", "", " search ", "get weather"]
KEYS = ["city", "days", "unit", "detail", "tags", "opts", "query", "k", "x", ""]
VALUES = ["Paris", "杭州", "5", " 7 ", "1.5", "true", "null", "c", '["a", "b"]', '{"n": "4"}', "a\nb", "",
          "😀", "{bad", "NaN", "1e400"]  # fmt: skip
TYPES = ["string", "integer", "number", "boolean", "array[string]", "object", "any", "null", " Integer "]


def xml_call(rng: random.Random, typed: bool) -> str:
    args = ""
    for _ in range(rng.randint(0, 3)):
        key = rng.choice(KEYS)
        kind = f"{T}{rng.choice(TYPES)}{TE}" if (typed and rng.random() < 0.9) or rng.random() < 0.05 else ""
        gap = rng.choice(["", "", "\n", " "])
        args += f"{K}{key}{KE}{gap}{kind}{V}{rng.choice(VALUES)}{rng.choice([VE, VE, VE, ''])}{gap}"
    return f"{C}{rng.choice(NAMES)}{rng.choice(['', '', chr(10)])}{args}{rng.choice([CE, CE, CE, ''])}"


def json_call(rng: random.Random) -> str:
    if rng.random() < 0.85:
        args = {rng.choice(KEYS) or "k": rng.choice([1, "5", "s", None, True, [1, "2"], {"n": "3"}, 1.5, "true"])
                for _ in range(rng.randint(0, 3))}
        body: Any = {"name": rng.choice(NAMES), "arguments": args}
        if rng.random() < 0.1:
            body["arguments"] = "not an object"
        text = json.dumps(body, ensure_ascii=rng.random() < 0.5)
    else:
        text = rng.choice(["{bad", "[1]", '{"name": 1}', "", '{"name": "search"}'])
    return f"{C}{rng.choice(['', ' ', chr(10)])}{text}{rng.choice([CE, CE, CE, ''])}"


def reasoning(rng: random.Random) -> list[Piece]:
    start, end = THINK[rng.choice(["high", "high", "high", "medium", "low"])]
    body = words(rng, [*WORDS, "plan", " step"], 0, 5)
    r = rng.random()
    if r < 0.4:
        return [body, rng.choice([end, end, end + "\n", ["spell", end], ""])]
    if r < 0.75:
        return [start, body, rng.choice([end, end, end + "\n\n", ""])]
    return []


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = reasoning(rng)
    pieces.append(rng.choice(["", "\n\n", "Sure. ", "  \n", "中文 ", words(rng, WORDS)]))
    fmt = rng.choice(["xml", "xml", "xml_typed", "json"])
    for _ in range(rng.choice([0, 1, 1, 1, 2])):
        calls = "".join(json_call(rng) if fmt == "json" else xml_call(rng, fmt == "xml_typed")
                        for _ in range(rng.randint(0, 3)))
        junk = rng.choice(["", "", "", "\n", " x "])
        pieces.append(rng.choice([G, G, G, ""]) + junk + calls + rng.choice([GE, GE, GE, ""]))
        pieces.append(rng.choice(["", "\n", " after", "\n\n"]))
    if rng.random() < 0.25:
        pieces.append(rng.choice([G, GE, C, CE, K, V, "<ifm|think>", "</ifm|think>", "<｜end▁of▁sentence｜>",
                                  ["spell", G], ["spell", "</ifm|think>"]]))
    pieces.append(rng.choice(["", " tail", "\n", words(rng, WORDS)]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


def _xml(name: str, *args: tuple[str, str]) -> str:
    return C + name + "".join(f"{K}{k}{KE}{V}{v}{VE}" for k, v in args) + CE


HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], ["  "], ["r</ifm|think>Hello"], ["<ifm|think>r</ifm|think>\n\nHello"],
    # vLLM's tests/tool_parsers/test_k2_horizon_tool_parser.py / tests/reasoning shapes
    ["r</ifm|think>Let me check. ", G, _xml("get_weather", ("city", "Paris"), ("days", "3")), GE],
    ["r</ifm|think>", G, _xml("get_weather", ("city", "A")), "\n", _xml("search", ("query", "q")), GE, " after"],
    ["r</ifm|think>", G, _xml("noargs"), GE],
    ["r</ifm|think>", G, _xml("unknown_tool", ("x", "1")), GE],
    ["r</ifm|think>", G, _xml("get_weather", ("city", "a"), ("city", "b")), GE],
    ["r</ifm|think>", G, _xml("get_weather", ("city", "A")), " junk ", GE],
    ["r</ifm|think>", G, _xml("get_weather", ("city", "A"))],
    ["r</ifm|think>", G, f'{C}{{"name": "search", "arguments": {{"query": "q", "k": "2"}}}}{CE}', GE],
    ["r</ifm|think>", G, f"{C}search{K}k{KE}{T}integer{TE}{V} 5 {VE}{CE}", GE],
    ["reasoning without an end ", G, _xml("search", ("query", "q")), GE],  # the group ends reasoning
    ["reasoning only, no end"],
    ["<ifm|think>r</ifm|think>x</ifm|think>y"],
    ["r", ["spell", "</ifm|think>"], "\n\nspelled end"],
    ["r</ifm|think>  \n", G, _xml("search", ("query", "q")), GE, "  "],
    ["<ifm|think_fast>fast</ifm|think_fast>done"], ["<ifm|think_faster>r</ifm|think_faster>", G, _xml("noargs"), GE],
]
