"""MiniCPM5 tool calls (``minicpm5``, ``minicpm5.py``): ``<function name="..."><param name="...">``
blocks, well-formed XML or not (the regex fallback), CDATA, wrappers
(``<arguments>``, a ``properties``/``arguments`` parameter), schema-typed
values, alias tool names, required parameters, tokenizer artefacts (``Ġ``,
``Ċ``, ``<functionname=``), text and thinking around them."""

from __future__ import annotations

import json
import random
from typing import Any

import cases_qwen3 as qwen3
from family_cases import CONTENT, Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    (None, "minicpm5"),
    ("qwen3", "minicpm5"),
    ("deepseek_r1", "minicpm5"),
]

TOKENS = {"special": ["<|im_start|>", "<|im_end|>"], "added": ["<function", "</function>"]}


def _tool(name: str, properties: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    parameters: dict[str, Any] = {"type": "object", "properties": properties, **extra}
    if required is not None:
        parameters["required"] = required
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


TOOLS: list[dict[str, Any]] = [
    _tool("get_weather", {"city": {"type": "string"}, "days": {"type": "integer"},
                          "detail": {"type": ["boolean", "null"]}, "ratio": {"type": "number"},
                          "tags": {"type": "array"}, "opts": {"$ref": "#/$defs/Opts"},
                          "mode": {"enum": ["a", 1]}, "any": {}}, ["city"], **{"$defs": {"Opts": {"type": "object"}}}),
    _tool("search", {"query": {"anyOf": [{"type": "string"}, {"type": "null"}]}, "k": {"type": "integer"}}),
    _tool("get_customer_by_phone", {"phone_number": {"type": "string"}}, ["phone_number"]),
    _tool("toggle_roaming", {"line_id": {"type": "string"}, "enabled": {"type": "boolean"}}),
    _tool("refuel_data", {"customer_id": {"type": "string"}, "line_id": {"type": "string"},
                          "amount_gb": {"type": "number"}}),
    _tool("get_details_by_id", {"id": {"type": "string"}}),
    _tool("free", {}, additionalProperties={"type": "integer"}),
    {"type": "function", "function": {"name": "noargs"}},
]  # fmt: skip
PROMPTS = ["<|im_start|>user\nweather?<|im_end|>\n<|im_start|>assistant\n", ""]
CALL = '<function name="get_weather"><param name="city">Paris</param></function>'
BENCH = (None, "minicpm5", CALL)
BENCH_OUTPUT = (CONTENT, "\n", CALL)  # bench/stream.py (served without a reasoning parser)

NAMES = ["get_weather", "search", "get_details_by_phone", "enable_roaming", "disable_roaming", "add_data_to_line",
         "get_plan_details", "get_line_status", "free", "noargs", "unknown", ""]  # fmt: skip
KEYS = ["city", "days", "detail", "ratio", "tags", "opts", "mode", "any", "query", "k", "phone", "phone_number",
        "line_id", "id", "plan_id", "gb", "amount", "customer_id", "x", "properties", "arguments"]  # fmt: skip
VALUES = ["Paris", "3", " 4 ", "1.5", "true", "null", "None", "[1, 2]", "{'a': 1}", '{"city": "Rome", "days": 2}',
          "(1, 2)", "{1, 2}", "a & b", "&lt;x&gt;", "<![CDATA[<b>]]>", "é😀", "", "\n5\n", "'s'", "1e400",
          "a"]  # fmt: skip


def param(rng: random.Random) -> str:
    if rng.random() < 0.05:
        return rng.choice(["<param>x</param>", "<param key='x'>1</param>"])
    quote = rng.choice(['"', '"', "'"])
    return f"<param name={quote}{rng.choice(KEYS)}{quote}>{rng.choice(VALUES)}</param>"


def block(rng: random.Random) -> str:
    params = rng.choice(["", "\n"]).join(param(rng) for _ in range(rng.randint(0, 3)))
    if rng.random() < 0.15:
        params = f"<arguments>{params}</arguments>"
    name = rng.choice(NAMES)
    head = rng.choice([f'<function name="{name}">', f"<function name='{name}'>", f'<functionname="{name}">',
                       f"<function name={name}>", f'<function name="{name}" id="1">'])
    return head + rng.choice(["", "\n"]) + params + rng.choice(["</function>", "\n</function>", ""])


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = qwen3.reasoning(rng) if rng.random() < 0.3 else []
    pieces.append(rng.choice(["", "", " ", "Sure. ", "Let me check.\n", words(rng, qwen3.WORDS)]))
    for _ in range(rng.randint(0, 3)):
        pieces.append(block(rng))
        pieces.append(rng.choice(["", "\n", " then "]))
    if rng.random() < 0.1:
        pieces = [json.dumps(p)[1:-1].replace("\\n", "\u010a").replace(" ", "\u0120") if isinstance(p, str) else p
                  for p in pieces]  # fmt: skip
    pieces.append(rng.choice(["", "", " tail", "\n", "<function", "</function>", "<|im_end|>", "</think>x"]))
    return truncate(rng, pieces) if rng.random() < 0.15 else pieces


HANDWRITTEN: list[list[Piece]] = [
    ["plain answer"], [CALL], ["Let me check.\n", CALL, "\nDone."],
    ['<function name="get_weather"><param name="city">Paris</param><param name="days">3</param></function>'],
    ['<function name="search"><param name="query">null</param><param name="k">5</param></function>'],
    ['<function name="get_weather"><param name="days">3</param></function>'],  # required city missing
    ['<function name="get_weather"><param name="city">a</param><param name="city">b</param></function>'],
    ['<function name="get_weather"><param name="city"><![CDATA[<b>Paris</b>]]></param></function>'],
    ['<function name="get_weather"><param name="city">a < b</param></function>'],
    ['<function name="get_weather"><arguments><param name="city">Rome</param></arguments></function>'],
    ['<function name="get_weather"><param name="properties">{"city": "Rome", "x": 1}</param></function>'],
    ['<function name="get_details_by_phone"><param name="phone">123</param></function>'],
    ['<function name="enable_roaming"><param name="id">L1</param></function>'],
    ['<function name="add_data_to_line"><param name="line_id">L1</param><param name="gb">2</param></function>'],
    ['<functionname="get_weather"><paramname="city">Paris</param></function>'],
    ["<function\u0120name=\"get_weather\"><param\u0120name=\"city\">Paris</param></function>"],
    ['<function name="unknown"><param name="a">1</param></function>'], ['<function name="noargs"></function>'],
    ['<function name="free"><param name="n">7</param></function>'], ["<function"], ['<function name="x">'],
    ["<think>r</think>\n\n", CALL], ['<function name="get_weather"><param name="city">{1, 2}</param>'
                                    '<param name="tags">{1, 2}</param></function>'],
]
