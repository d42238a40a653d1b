"""dots tool calls (``dots``, ``dots.py``): ``<dots_function_call>`` blocks of
XML invokes (parameters typed by the request's schema) or one JSON object,
several blocks, unknown tools, unclosed blocks, text around them."""

from __future__ import annotations

import json
import random
from typing import Any

import cases_qwen3 as qwen3
from family_cases import Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    (None, "dots"),
    ("qwen3", "dots"),
    ("deepseek_r1", "dots"),
]

TOKENS = {"special": ["<|im_start|>", "<|im_end|>", "<|endoftext|>"],
          "added": ["<dots_function_call>", "</dots_function_call>"]}  # fmt: skip
TOOLS: list[dict[str, Any]] = [
    *qwen3.TOOLS,
    {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {
        "item": {"$ref": "#/$defs/Item"}, "n": {"oneOf": [{"type": "null"}, {"type": "number"}]},
        "flag": {"type": "bool"}}, "$defs": {"Item": {"type": "object"}}}}},
]  # fmt: skip
PROMPTS = ["<|im_start|>user\nweather?<|im_end|>\n<|im_start|>assistant\n", ""]
START, END = "<dots_function_call>", "</dots_function_call>"
CALL = f'{START}\n<invoke name="search">\n<parameter name="query">weather</parameter>\n</invoke>\n{END}'
BENCH = (None, "dots", CALL)

NAMES = ["get_weather", "search", "noargs", "set_config", "lookup", "unknown", '"search"', "'lookup'", " search "]
KEYS = ["city", "days", "unit", "detail", "ratio", "tags", "opts", "query", "k", "port", "count", "value", "enabled",
        "item", "n", "flag", '"city"', "x"]  # fmt: skip
VALUES = ["Paris", "5", " 7 ", "-1e3", "1.5", "2.0", "true", "1", "False", "null", "NULL", '["a", "b"]',
          '{"n": "4"}', "a\nb", "", "{bad", "😀", "1e400", "nan", "0x1"]  # fmt: skip


def invoke(rng: random.Random) -> str:
    params = "".join(
        f'<parameter name={rng.choice(["", "", " "])}"{rng.choice(KEYS)}">{rng.choice(VALUES)}</parameter>'
        + rng.choice(["\n", ""]) for _ in range(rng.randint(0, 3)))
    name = rng.choice(NAMES)
    return f"<invoke name={name if name[0] in chr(34) + chr(39) else json.dumps(name)}>\n{params}</invoke>"


def block(rng: random.Random) -> list[Piece]:
    if rng.random() < 0.25:
        value: Any = rng.choice([{"name": rng.choice(NAMES[:5]), "arguments": qwen3.json_value(rng)},
                                 {"name": "search", "parameters": {"query": "q"}}, {"name": "search"}, [1],
                                 {"name": "search", "arguments": None}])
        body = json.dumps(value) if rng.random() < 0.9 else "{bad"
    else:
        body = rng.choice(["\n", "", " "]).join(invoke(rng) for _ in range(rng.randint(1, 3)))
    return [START, rng.choice(["\n", ""]) + body, rng.choice(["\n" + END, END, END, ""])]


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = qwen3.reasoning(rng) if rng.random() < 0.3 else []
    pieces.append(rng.choice(["", "  \n", "Sure. ", "Let me check.\n\n", " x ", words(rng, qwen3.WORDS)]))
    for _ in range(rng.randint(0, 2)):
        pieces += block(rng)
        pieces.append(rng.choice(["", "\n", " then "]))
    pieces.append(rng.choice(["", "", " tail", "\n", START, END, "<|im_end|>", words(rng, qwen3.WORDS)]))
    return truncate(rng, pieces) if rng.random() < 0.15 else pieces


HANDWRITTEN: list[list[Piece]] = [
    ["plain answer"], [CALL], ["Let me check.\n", CALL, "\nDone."], ["  \n", CALL],
    [f'{START}<invoke name="get_weather"><parameter name="city">Paris</parameter>'
     f'<parameter name="days">3</parameter></invoke>{END}'],
    [f'{START}{{"name": "search", "arguments": {{"query": "q"}}}}{END}'],
    [f'{START}<invoke name="unknown"><parameter name="a">1</parameter></invoke>{END}'],
    [f'{START}<invoke name="search"><parameter name="query">q</parameter></invoke>'],
    [f"{START}{{bad}}{END}{CALL}"], [f'{START}[{{"name": "search"}}]{END}'],
    [f'{START}<invoke name="lookup"><parameter name="item">{{"a": 1}}</parameter><parameter name="n">4.0</parameter>'
     f'<parameter name="flag">TRUE</parameter></invoke>{END}'],
    [f'{START}<invoke name=\'set_config\'><parameter name="port">null</parameter>'
     f'<parameter name="count">07</parameter></invoke>{END}'],
    [CALL, CALL], ["a", END], [START],
]
