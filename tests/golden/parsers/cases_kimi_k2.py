"""Kimi K2 outputs: <think> reasoning, <|tool_calls_section_begin|> calls with
``functions.NAME:N`` headers and JSON arguments, and their malformed shapes."""

from __future__ import annotations

import json
import random
from typing import Any

from family_cases import Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    ("kimi_k2", "kimi_k2"),
    ("kimi_k2", None),
    (None, "kimi_k2"),
    ("deepseek_r1", "kimi_k2"),  # a legacy composition
]

SECTION, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CALL, ARG, CALL_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
# The test tokenizer (family_tokens.py): <think> and </think> are DeepSeek V4 added tokens already.
TOKENS = {"special": ["<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_middle|>"],
          "added": [SECTION, SECTION_END, CALL, ARG, CALL_END]}  # fmt: skip

BENCH = ("kimi_k2", "kimi_k2", f'{SECTION}{CALL}functions.search:0{ARG}{{"query": "derender streaming", "k": 5}}'
         f"{CALL_END}{SECTION_END}")

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "unit": {"type": "string", "enum": ["c", "f"]},
        "detail": {"type": ["boolean", "null"]}, "tags": {"type": "array", "items": {"type": "string"}},
        "opts": {"type": "object", "properties": {"n": {"type": "integer"}}}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "k": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "noargs"}},
]  # fmt: skip

# KimiK2Parser thinks unless thinking/enable_thinking say otherwise.
REQUESTS: list[dict[str, Any]] = [
    {"tools": TOOLS, "chat_template_kwargs": {"thinking": False}},
    {"chat_template_kwargs": {"thinking": False}},
    {"tools": TOOLS, "chat_template_kwargs": {"thinking": None, "enable_thinking": True}},
]

U, A, M, E = "<|im_user|>", "<|im_assistant|>", "<|im_middle|>", "<|im_end|>"
PROMPTS = [f"{U}user{M}weather?{E}{A}assistant{M}", f"{U}user{M}weather?{E}{A}assistant{M}<think>", ""]

WORDS = ["hello", " world", "世界", "😀", " ", "\n", "\t", "x", '"', ">", "<", "{", "}", " answer: 42",
         "éß", "\u00a0", "\\", " = ", "/", ":", "|"]  # fmt: skip
HEADERS = ["functions.get_weather:0", "functions.search:1", "functions.noargs:2", "get_weather:3", "search",
           "functions.search", " functions.search:12 ", "functions.unknown_tool:0", "functions.:0", "",
           "functions.a:b:1", "functions.get weather:0", "functions.search:x", "functions.search:0\n"]  # fmt: skip
KEYS = ["city", "days", "unit", "detail", "tags", "opts", "query", "k", "x", "name"]


def json_args(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.75:
        args = {rng.choice(KEYS): rng.choice([1, "5", "s", "é😀", None, True, "a\nb", [1, "2"], {"n": "3"}, 1.5,
                                             "search", "false"]) for _ in range(rng.randint(0, 3))}
        return json.dumps(args, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, None, 2]))
    return rng.choice(["{bad", "", " ", "[1]", '"s"', '{"name": "search", "arguments": {"query": "q"}}',
                       '{"name": "noargs"}', " {} "])


def call(rng: random.Random) -> str:
    head = rng.choice(HEADERS)
    arg = rng.choice([ARG, ARG, ARG, ARG, ""])
    end = rng.choice([CALL_END, CALL_END, CALL_END, ""])
    return f"{CALL}{head}{arg}{json_args(rng)}{end}" + rng.choice(["", "", "\n"])


def reasoning(rng: random.Random) -> list[Piece]:
    r = rng.random()
    body = words(rng, [*WORDS, "plan", " step"], 0, 5)
    end: Piece = rng.choice(["</think>", "</think>\n\n", "\n</think>", ["spell", "</think>"], ""])
    if r < 0.5:
        return [body, end]  # the template opened <think>
    if r < 0.8:
        return ["<think>", body, end]
    return []


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = reasoning(rng)
    pieces.append(rng.choice(["", "\n\n", "Sure. ", "  \n", "中文 ", words(rng, WORDS)]))
    for _ in range(rng.choice([0, 1, 1, 1, 2])):
        calls = "".join(call(rng) for _ in range(rng.randint(0, 3)))
        pieces.append(rng.choice([SECTION, SECTION, SECTION, ""]) + calls + rng.choice([SECTION_END, SECTION_END, ""]))
        pieces.append(rng.choice(["", "\n", " after", "\n\n"]))
    if rng.random() < 0.25:
        pieces.append(rng.choice(["<think>", "</think>", SECTION, SECTION_END, CALL, ARG, CALL_END, E,
                                  "<｜end▁of▁sentence｜>", ["spell", SECTION], ["spell", "</think>"]]))
    pieces.append(rng.choice(["", " tail", "\n", words(rng, WORDS)]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


def _calls(*calls: str) -> str:
    return SECTION + "".join(calls) + SECTION_END


def _call(header: str, args: str) -> str:
    return f"{CALL}{header}{ARG}{args}{CALL_END}"


HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], ["r</think>Hello"], ["<think>r</think>\n\nHello"],
    # vLLM's tests/parser/test_kimi_k2.py / tests/tool_parsers/test_kimi_k2_tool_parser.py shapes
    ["r</think>Let me check. ", _calls(_call("functions.get_weather:0", '{"city": "Tokyo"}'))],
    ["r</think>", _calls(_call("functions.get_weather:0", '{"city": "A"}'), _call("functions.search:1",
                                                                                 '{"query": "q", "k": "3"}'))],
    ["r</think>", _calls(_call("functions.get_weather:0", '{"days": "5", "detail": "true", "opts": {"n": "4"}}'))],
    ["r</think>", _calls(_call("functions.noargs:0", ""))],
    ["r</think>", _calls(_call("search", '{"name": "search", "arguments": {"query": "q"}}'))],
    ["r</think>", _calls(_call("functions.search:0", "{bad json"))],
    ["r</think>", _calls(_call("functions.search:0", '{"query": "q"}')), " text after the section"],
    ["r</think>", SECTION, _call("functions.search:0", '{"query": "q"}')],
    ["r</think>", SECTION, CALL, "functions.search:0", ARG, '{"query": "open'],
    ["r</think>", SECTION, CALL, "functions.sea"],
    ["reasoning ", _calls(_call("functions.search:0", "{}"))],  # the section ends reasoning
    ["r</think>", _call("functions.search:0", "{}")],  # a call without its section is text
    ["r</think>x</think>y<think>z"],
    ["r", ["spell", "</think>"], "\n\nspelled end"],
    ["r</think><|im_end|>a<｜end▁of▁sentence｜>b"],
    ["r</think>  \n", _calls(_call("functions.get_weather:0", '{"city": "P"}')), "  "],
    ["<think>plan</think>", _calls(_call("functions.a:b:1", "{}"), _call(" functions.search:12 ", " {} "))],
]
