"""Hunyuan HY V3 / V4 outputs: ``<think>`` reasoning (opened by the prompt or
the output) and ``<tool_calls><tool_call>name<tool_sep><arg_key>k</arg_key>
<arg_value>v</arg_value></tool_call></tool_calls>`` calls (V4: no
``<tool_sep>``, no space between key and value), each parser reading the
other's shape too, with unclosed and malformed tags and the reasoning
switch (``reasoning_effort``, ``no_think``)."""

from __future__ import annotations

import random
from typing import Any

import cases_qwen3 as q
from family_cases import Piece, truncate, words

__all__ = ["BENCH", "HANDWRITTEN", "PAIRS", "PROMPTS", "REQUESTS", "TOKENS", "TOOLS", "output"]

TOOLS = q.TOOLS

PAIRS: list[tuple[str | None, str | None]] = [
    ("hy_v3", "hy_v3"),
    ("hy_v3", None),
    (None, "hy_v3"),
    ("hy_v4", "hy_v4"),
    ("hy_v4", None),
    (None, "hy_v4"),
    ("deepseek_r1", "hy_v4"),
]

# The tool markup is ordinary added tokens (<think> and </think> are DeepSeek V4's already).
TOKENS = {
    "special": ["<|startoftext|>", "<|extra_0|>", "<|eos|>"],
    "added": ["<tool_calls>", "</tool_calls>", "<tool_call>", "</tool_call>", "<tool_sep>", "<arg_key>",
              "</arg_key>", "<arg_value>", "</arg_value>"],
}  # fmt: skip

# The reasoning switch both parsers read (the resolved chat_template_kwargs' reasoning_effort).
REQUESTS: list[dict[str, Any]] = [
    {"tools": TOOLS, "reasoning_effort": "high"},
    {"tools": TOOLS, "reasoning_effort": "low"},
    {"tools": TOOLS, "chat_template_kwargs": {"reasoning_effort": "no_think"}},
    {"tools": TOOLS, "chat_template_kwargs": {"reasoning_effort": "high"}},
    {"chat_template_kwargs": {"reasoning_effort": "medium"}},
]

BENCH = ("hy_v4", "hy_v4", "<tool_calls><tool_call>search<arg_key>query</arg_key><arg_value>derender streaming"
         "</arg_value><arg_key>k</arg_key><arg_value>5</arg_value></tool_call></tool_calls>")

HEAD = "<|startoftext|>weather?<|extra_0|>"
PROMPTS = [HEAD, HEAD + "<think>", HEAD + "<think></think>", ""]

NAMES = [*q.NAMES, "search\n"]
KEYS = [*q.KEYS, " city "]
VALUES = [*q.VALUES, "<arg_key>", "</arg_value>", " spaced ", "{1, 2}", "b'x'", "(1, 2)", "True", "[1, 2"]


def arg(rng: random.Random, sep: str) -> str:
    key, value = rng.choice(KEYS), rng.choice(VALUES)
    r = rng.random()
    if r < 0.88:
        return f"<arg_key>{key}</arg_key>{sep}<arg_value>{value}</arg_value>"
    if r < 0.94:
        return f"<arg_key>{key}</arg_key>{sep}<arg_value>{value}"  # unclosed value
    return rng.choice([f"<arg_value>{value}</arg_value>", f"<arg_key>{key}</arg_key>", " x "])


def call(rng: random.Random) -> str:
    v3 = rng.random() < 0.5
    sep = rng.choice(["", "", "\n", " "]) if v3 else rng.choice(["", "", "", "", "", "\n"])
    name = rng.choice(NAMES)
    head = f"{name}<tool_sep>" if v3 else name + rng.choice(["", "", "\n"])
    body = "".join(arg(rng, sep) for _ in range(rng.randint(0, 3)))
    return "<tool_call>" + head + body + rng.choice(["</tool_call>", "</tool_call>", "</tool_call>\n", ""])


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = []
    if rng.random() < 0.7:
        pieces += [rng.choice(["", "", "<think>", "x<think>"]), words(rng, [*q.WORDS, "plan"], 0, 4),
                   rng.choice(["</think>", "</think>\n", "\n</think>\n\n", ["spell", "</think>"], ""])]  # fmt: skip
    pieces.append(rng.choice(["", "\n", "Sure. ", "  ", words(rng, q.WORDS)]))
    if rng.random() < 0.75:
        pieces.append(rng.choice(["<tool_calls>", "<tool_calls>", "<tool_calls>\n", ["spell", "<tool_calls>"]]))
        for _ in range(rng.randint(0, 3)):
            pieces += [call(rng), rng.choice(["", "", "\n", " x "])]
        pieces.append(rng.choice(["</tool_calls>", "</tool_calls>", "", "</tool_calls>\n"]))
    if rng.random() < 0.2:
        pieces.append(rng.choice(["<tool_call>", "</tool_call>", "</tool_calls>", "<tool_calls>", "<tool_sep>",
                                  "</think>", "<think>", "<|eos|>", call(rng)]))  # fmt: skip
    pieces.append(rng.choice(["", "", " tail", "\n"]))
    return truncate(rng, pieces) if rng.random() < 0.15 else pieces


def _kv(key: str, value: str) -> str:
    return f"<arg_key>{key}</arg_key><arg_value>{value}</arg_value>"


_V4 = "<tool_calls><tool_call>get_weather" + _kv("city", "Paris") + _kv("days", "5") + "</tool_call></tool_calls>"
_V3 = ("<tool_calls><tool_call>get_weather<tool_sep>" + _kv("city", "Paris") + _kv("days", "5")
       + "</tool_call></tool_calls>")
HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], ["<think>abc</think>def"], ["abc</think>\n\ndef"], ["abc"], ["pre<think>abc</think>def"],
    ["abc</think>Let me check. ", _V4], ["abc</think>", _V3], ["abc</think>\n\n", _V4, " after"],
    ["abc</think>", "<tool_calls><tool_call>noargs</tool_call></tool_calls>"],
    ["abc</think>", "<tool_calls><tool_call>search<tool_sep>", _kv("query", "q"), _kv("k", "5"), "</tool_call>",
     "<tool_call>noargs<tool_sep></tool_call></tool_calls>"],
    ["abc</think>", "<tool_calls><tool_call>search<tool_sep>", _kv("query", "open")],
    ["abc</think>", "<tool_calls><tool_call>get_weather", _kv("city", "a"), _kv("city", "b"),
     "</tool_call></tool_calls>"],
    ["abc</think>", "<tool_calls><tool_call>", _kv("city", "a"), "</tool_call></tool_calls>"],
    ["abc</think>", "<tool_calls><tool_call>get_weather", _kv("city", "a"), " junk</tool_call></tool_calls>"],
    ["abc</think>", "<tool_calls>nothing</tool_calls>"], ["abc</think>", "<tool_calls>"],
    ["abc</think>", "<tool_calls><tool_call>set_config", _kv("port", "80"), _kv("count", "x"), _kv("value", "3"),
     _kv("enabled", "TRUE"), "</tool_call></tool_calls>"],
    ["abc</think>", "<tool_calls><tool_call>get_weather", _kv("tags", "[1, 2]"), _kv("opts", "{'n': 1}"),
     _kv("ratio", "1e3"), _kv("detail", "false"), "</tool_call></tool_calls>"],
    ["abc</think>", "<tool_calls><tool_call>unknown_tool", _kv("a", "{1, 2}"), "</tool_call></tool_calls>"],
    ["abc</think>", "</tool_calls>x<tool_calls><tool_call>noargs</tool_call></tool_calls>"],
    # vLLM's tests/tool_parsers/test_hy_v4_tool_parser.py (no tag suffix)
    ["sure!<tool_calls><tool_call>get_weather", _kv("city", "Beijing"), _kv("days", "3"), "</tool_call></tool_calls>"],
    ["<tool_calls><tool_call>get_weather", _kv("city", "北京"),
     "</tool_call><tool_call>noargs</tool_call></tool_calls>"],
    ["<tool_calls><tool_call>noargs</tool_call>"],
    ["<tool_calls><tool_call>get_weather", _kv("city", "X"), "</tool_calls>"],
    ["<tool_calls><tool_call></tool_call></tool_calls>"],
    ["<tool_calls><tool_call>get_weather<arg_key>city</arg_key></tool_call></tool_calls>"],
    ["hi<tool_calls>\n  <tool_call>get_weather", _kv("city", "Beijing"), "</tool_call></tool_calls>"],
    # A </tool_calls> before the block (V4 refuses it), under tool_choice "none" and then with tools.
    ["</tool_calls>"], ["abc</think>Hi </tool_calls> ", _V4], ["abc</think></tool_calls>", _V3, "</tool_calls>"],
]
