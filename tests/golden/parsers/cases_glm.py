"""GLM-4.5/4.7 outputs: <think> reasoning (opened by the output or by the
template), <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>
calls with and without newlines, and their malformed shapes."""

from __future__ import annotations

import random
from typing import Any

from cases_qwen3 import TOOLS, VALUES, WORDS
from family_cases import Piece, truncate, words

__all__ = ["BENCH", "HANDWRITTEN", "PAIRS", "PROMPTS", "REQUESTS", "TOKENS", "TOOLS", "output"]

PAIRS: list[tuple[str | None, str | None]] = [
    ("glm45", "glm45"),
    ("glm47", "glm47"),
    ("glm47", None),
    (None, "glm45"),
    ("deepseek_r1", "glm47"),
]

# GLM's turn markers are special tokens (their text is dropped); its tool
# markup tokens are ordinary added tokens, as <think> is (already in DeepSeek V4's).
TOKENS = {
    "special": ["<|endoftext|>", "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>",
                "/nothink"],
    "added": ["<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
              "<tool_response>", "</tool_response>"],
}  # fmt: skip

# GLM's own thinking switch (Glm47MoeParser reads `thinking` and `enable_thinking`).
REQUESTS: list[dict[str, Any]] = [
    {"tools": TOOLS, "chat_template_kwargs": {"thinking": False}},
    {"tools": TOOLS, "chat_template_kwargs": {"thinking": False, "enable_thinking": True}},
    {"tools": TOOLS, "chat_template_kwargs": {"thinking": None, "enable_thinking": 0}},
    {"chat_template_kwargs": {"enable_thinking": False}},
]

BENCH = ("glm47", "glm47", "<tool_call>search<arg_key>query</arg_key><arg_value>derender streaming</arg_value>"
         "<arg_key>k</arg_key><arg_value>5</arg_value></tool_call>")

HEAD = "[gMASK]<sop><|system|>\nYou can call tools.<|user|>\nweather?<|assistant|>"
PROMPTS = [
    HEAD,  # GLM-4.5: the output opens <think>
    HEAD + "\n<think></think>\n",  # GLM-4.5, thinking off
    HEAD + "<think>",  # GLM-4.7 opens reasoning
    HEAD + "</think>",  # GLM-4.7, thinking off
    HEAD + "<think>r</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"
    "<|observation|><tool_response>sunny</tool_response><|assistant|><think>",  # an earlier turn's call
    "",
]

NAMES = ["get_weather", "search", "noargs", "set_config", "unknown_tool", "", " search ", "get weather", "search\n",
         "\n"]  # fmt: skip
KEYS = ["city", "days", "unit", "detail", "ratio", "tags", "opts", "query", "k", "port", "count", "value",
        "enabled", "x", "", " city "]  # fmt: skip
GLM_VALUES = [*VALUES, '{"name": "search"}', "<arg_key>", "</arg_key>", " spaced "]


def glm_arg(rng: random.Random, nl: str) -> str:
    key = rng.choice(KEYS)
    value = rng.choice(GLM_VALUES)
    r = rng.random()
    if r < 0.75:
        return f"<arg_key>{key}</arg_key>{nl}<arg_value>{value}</arg_value>{nl}"
    if r < 0.85:
        return f"<arg_key>{key}</arg_key>{rng.choice([' ', 'x', nl])}<arg_value>{value}</arg_value>{nl}"
    if r < 0.93:
        return f"<arg_key>{key}</arg_key>{nl}<arg_value>{value}"  # unclosed value
    return f"<arg_value>{value}</arg_value>{nl}"  # a value without a key


def glm_call(rng: random.Random) -> str:
    nl = rng.choice(["", "\n", "\n", ""])
    args = "".join(glm_arg(rng, nl) for _ in range(rng.randint(0, 4)))
    name = rng.choice(NAMES)
    tail = rng.choice(["</tool_call>", "</tool_call>", "</tool_call>", "</tool_call>\n", ""])
    head = rng.choice(["<tool_call>", "<tool_call>", "<tool_call>", "<tool_call>\n"])
    return f"{head}{name}{nl}{args}{tail}"


def reasoning(rng: random.Random) -> list[Piece]:
    r = rng.random()
    body = words(rng, [*WORDS, "plan", " step"], 0, 5)
    end: Piece = rng.choice(["</think>", "</think>\n", "\n</think>\n\n", ["spell", "</think>"], ""])
    if r < 0.45:
        return [body, end]  # GLM-4.7: the template opened <think>
    if r < 0.8:
        return ["<think>", body, end]  # GLM-4.5
    return []


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = reasoning(rng)
    pieces.append(rng.choice(["", "\n", "Sure. ", "  \n", "中文 ", words(rng, WORDS)]))
    for _ in range(rng.randint(0, 3)):
        pieces.append(glm_call(rng))
        pieces.append(rng.choice(["", "\n", " ", "\n\n", "between "]))
    if rng.random() < 0.25:
        pieces.append(rng.choice(["<tool_call>", "</tool_call>", "<arg_key>", "</arg_value>", "</think>", "<think>",
                                  "<|user|>", "<|observation|>", "<|endoftext|>", ["spell", "<tool_call>"]]))
    pieces.append(rng.choice(["", " tail", "\n", words(rng, WORDS)]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


def _call(name: str, args: str = "", nl: str = "\n") -> str:
    return f"<tool_call>{name}{nl}{args}</tool_call>"


def _kv(key: str, value: str, nl: str = "\n") -> str:
    return f"<arg_key>{key}</arg_key>{nl}<arg_value>{value}</arg_value>{nl}"


HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], ["<think>r</think>Hello"], ["r</think>\nHello"],
    ["<think>r</think>\nHello ", _call("get_weather", _kv("city", "Paris") + _kv("days", "5")), " after"],
    ["r</think>", _call("get_weather", _kv("city", "Paris", ""), ""), _call("search", _kv("query", "q", ""), "")],
    ["r</think>", _call("get_weather", _kv("city", "a") + _kv("city", "b"))],
    ["r</think>", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>open value"],
    ["r</think>", "<tool_call>get_wea"],
    ["<think>reasoning ", _call("search", _kv("query", "q"))],  # a call ends reasoning
    ["r</think>", _call("noargs", "", "")],
    ["r</think>", _call("  noargs \n", "", "")],
    ["r</think>", _call("", _kv("x", '{"name": "search"}'), "")],
    ["r</think>", _call("\n", _kv("x", '{"name": " search "}'), "")],
    ["r</think>", _call("unknown_tool", _kv("city", "Paris")), " kept?"],
    ["r</think>x</think>y<think>z</think>w"],
    ["r", ["spell", "</think>"], "\nspelled end"],
    ["r</think><|user|>a<|endoftext|>b/nothink"],
    ["r</think>  \n", _call("get_weather", _kv("city", "Paris")), "  "],
    ["r</think>", _call("get_weather", _kv("opts", '{"n": "4"}') + _kv("tags", '["a"]') + _kv("detail", "true"))],
    ["r</think>", _call("get_weather", _kv(" city ", " Paris ")
                        + "<arg_key>days</arg_key> \n <arg_value>3</arg_value>")],
    ["r</think>", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>a<tool_call>b</arg_value></tool_call>"],
    # vLLM's tests/parser/engine/test_glm47_stray_tool_call.py shapes (0.34 has no stray-call recovery)
    ["</think>Fetching. I will issue a <tool_call>", "get_weather</tool_call>"],
    ["</think>text <tool_call><tool_call>get_weather</tool_call>"],
    ["</think>text <tool_call>"],
    ["</think>prose <tool_call><tool_call>get_weather<arg_key>city</arg_key><arg_value>BJ</arg_value></tool_call>"],
    ["</think>", _call("set_config", _kv("port", "8080", "") + _kv("count", "42", "") + _kv("value", "null", "")
                       + _kv("enabled", "true", ""), "")],
    ["<think>\nI should call it.\n</think>\n", _call("get_weather", _kv("city", "Paris")), "<|user|>"],
    ["<think></think>", "Plain.\n", _call("search", _kv("query", "a\nb") + _kv("k", "5")), "\n"],
]
