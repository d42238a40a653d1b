"""Poolside (Laguna) outputs: ``deepseek_v3``-style ``<think>`` reasoning
(only with ``thinking``/``enable_thinking`` on) and GLM-4's
``<tool_call>name\\n<arg_key>k</arg_key>\\n<arg_value>v</arg_value>\\n</tool_call>``
calls read by vLLM's regular expressions, with values converted by the
schema (verbatim strings, JSON, then Python literals: sets, tuples, bytes
and bad literals reach vLLM's catch-all)."""

from __future__ import annotations

import random
from typing import Any

from cases_glm import KEYS as GLM_KEYS
from cases_glm import _call, _kv, reasoning
from cases_qwen3 import TOOLS as QWEN3_TOOLS
from cases_qwen3 import VALUES, WORDS
from family_cases import Piece, truncate, words

__all__ = ["BENCH", "HANDWRITTEN", "PAIRS", "PROMPTS", "REQUESTS", "TOKENS", "TOOLS", "output"]

PAIRS: list[tuple[str | None, str | None]] = [
    ("poolside_v1", "poolside_v1"),
    ("poolside_v1", None),
    (None, "poolside_v1"),
    ("deepseek_r1", "poolside_v1"),
]

# <assistant> must be in the vocabulary (PoolsideV1ReasoningParser); the
# turn markers are special tokens, the tool markup ordinary added tokens.
TOKENS = {
    "special": ["<system>", "</system>", "<user>", "</user>", "<assistant>", "</assistant>"],
    "added": ["<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
              "<tool_response>", "</tool_response>"],
}  # fmt: skip

TOOLS: list[dict[str, Any]] = [
    *QWEN3_TOOLS,
    {"type": "function", "function": {"name": "write_file", "parameters": {
        "type": "object", "$defs": {"Mode": {"type": "integer"}},
        "properties": {"content": {"type": "string"}, "mode": {"$ref": "#/$defs/Mode"},
                       "flag": {"allOf": [{"type": ["integer", "string"]}, {"type": "number"}]},
                       "kind": {"const": "a"}, "level": {"enum": [1, "x", None]},
                       "any": {"anyOf": [{"type": "string"}, {}]}, "loop": {"$ref": "#/properties/loop"}},
        "additionalProperties": {"type": "number"}}}},
]  # fmt: skip

# deepseek_v3's switch: thinking only when `thinking` or `enable_thinking` is truthy.
REQUESTS: list[dict[str, Any]] = [
    {"tools": TOOLS, "chat_template_kwargs": {"thinking": True}},
    {"tools": TOOLS, "chat_template_kwargs": {"enable_thinking": True}},
    {"chat_template_kwargs": {"thinking": True}},
    {"tools": TOOLS, "tool_choice": "required", "chat_template_kwargs": {"thinking": True}},
    {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
     "chat_template_kwargs": {"thinking": 1}},
    {"tools": TOOLS, "tool_choice": "none", "chat_template_kwargs": {"thinking": True}},
    {"tools": TOOLS, "include_reasoning": False, "chat_template_kwargs": {"thinking": True}},
    {"tools": TOOLS, "chat_template_kwargs": {"thinking": None, "enable_thinking": "yes"}},
]  # fmt: skip

BENCH = ("poolside_v1", "poolside_v1", "<tool_call>search\n<arg_key>query</arg_key>\n<arg_value>derender streaming"
         "</arg_value>\n<arg_key>k</arg_key>\n<arg_value>5</arg_value>\n</tool_call>")

HEAD = "<system>You can call tools.</system><user>weather?</user>"
PROMPTS = [
    HEAD + "<assistant>",
    HEAD + "<assistant><think>",
    HEAD + "<assistant><think></think>",
    "<user>a</user><assistant><think>r</think>b</assistant>" + HEAD + "<assistant>",  # an earlier turn's </think>
    "",
]

NAMES = ["get_weather", "search", "noargs", "set_config", "write_file", "unknown_tool", "", " search ",
         "get weather", "  ", "\n", "a\nb", "\x1cname", "na<me"]  # fmt: skip
KEYS = [*GLM_KEYS, "content", "mode", "flag", "kind", "level", "any", "loop", "extra"]
LITERALS = ["{1, 2}", "(1, 2)", "{'a': 1}", "True", "None", "b'x'", "1j", "...", "[1,", "{(1, 2): 3}", "{[1]: 2}",
            " 420 ", "1_000", "0x10", "'single'", "[1, 'a', None]", "{1: 'x'}", "-0", "1e5", "Infinity", "{{1}}",
            "  keep  spaces  ", "[" * 30 + "]" * 30]  # fmt: skip
POOL_VALUES = [*VALUES, *LITERALS, "<arg_key>", "</arg_key>", "a</arg_value", "\n    def f():\n        return 1\n"]


# An argument's shapes (weight, format): well-formed, odd text between key and
# value, an unclosed value, a value without a key.
ARG_SHAPES = [
    (75, "<arg_key>{key}</arg_key>{nl}<arg_value>{value}</arg_value>{nl}"),
    (10, "<arg_key>{key}</arg_key>{sep}<arg_value>{value}</arg_value>{nl}"),
    (8, "<arg_key>{key}</arg_key>{nl}<arg_value>{value}"),
    (7, "<arg_value>{value}</arg_value>{nl}"),
]


def arg(rng: random.Random, nl: str) -> str:
    [shape] = rng.choices([f for _, f in ARG_SHAPES], [w for w, _ in ARG_SHAPES])
    sep = rng.choice([" ", "x", nl, " " + nl + " "])
    return shape.format(key=rng.choice(KEYS), value=rng.choice(POOL_VALUES), nl=nl, sep=sep)


def call(rng: random.Random) -> str:
    nl = rng.choice(["\n", "\n", "", " \n "])
    args = "".join(arg(rng, nl) for _ in range(rng.randint(0, 4)))
    head = rng.choice(["<tool_call>", "<tool_call>", "<tool_call>", "<tool_call>\n", "<tool_call> "])
    tail = rng.choice(["</tool_call>", "</tool_call>", "</tool_call>", "</tool_call>\n", ""])
    junk = rng.choice(["", "", "", "", "text", "\n\n", "<x"])
    return f"{head}{rng.choice(NAMES)}{nl}{junk}{args}{tail}"


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = reasoning(rng)
    pieces.append(rng.choice(["", "\n", "Sure. ", "  \n", "中文 ", words(rng, WORDS)]))
    for _ in range(rng.randint(0, 3)):
        pieces.append(call(rng))
        pieces.append(rng.choice(["", "\n", " ", "\n\n", "between "]))
    if rng.random() < 0.25:
        pieces.append(rng.choice(["<tool_call>", "</tool_call>", "<arg_key>", "</arg_value>", "</think>", "<think>",
                                  "<user>", "<assistant>", "<tool_call><tool_call>a</tool_call>",
                                  ["spell", "<tool_call>"], ["spell", "</tool_call>"]]))
    pieces.append(rng.choice(["", " tail", "\n", words(rng, WORDS)]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


HANDWRITTEN: list[list[Piece]] = [
    # vLLM's tests/tool_parsers/test_poolside_v1_tool_parser.py
    [_call("write_file", _kv("content", "    def f():\n        return 1\n"))],
    [_call("write_file", _kv("content", "hi") + _kv("mode", " 420 "))],
    [_call("write_file", _kv("content", "  x = 1\n"))],
    ["<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"],
    [_call("get_weather", _kv("city", "Paris"))],
    ["<tool_call>" + " " * 200 + "<x</tool_call>"],
    ["<tool_call>   </tool_call>"],
    ["<tool_call>  get weather  <arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"],
    # vLLM's tests/reasoning/test_poolside_v1_reasoning_parser.py (its prompt rule does not reach the answer)
    ["<think>r</think>answer"], ["r</think>answer"], ["plain answer"], [""],
    # ours
    ["Hello ", _call("get_weather", _kv("city", "Paris") + _kv("days", "5")), " after"],
    ["  \n", _call("search", _kv("query", "q") + _kv("k", "5")), _call("noargs", "", "")],
    [_call("get_weather", _kv("city", "a") + _kv("city", "b"))],
    [_call("write_file", _kv("mode", "{1, 2}"))],  # a set: json.dumps fails, the text is the content
    [_call("write_file", _kv("extra", "{(1, 2): 3}"))],
    [_call("write_file", _kv("extra", "{[1]: 2}"))],
    [_call("unknown_tool", _kv("x", "(1, 2)") + _kv("y", "b'x'") + _kv("z", "1j"))],
    [_call("write_file", _kv("flag", "7") + _kv("kind", "a") + _kv("level", "None") + _kv("any", " 5 ")
           + _kv("loop", "[1]") + _kv("extra", "2.5") + _kv("mode", "1.0"))],
    [_call("set_config", _kv("port", "null") + _kv("count", "042") + _kv("value", "None") + _kv("enabled", "True"))],
    ["<tool_call>a<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>X</arg_value>\n</tool_call>"],
    ["<tool_call>get_weather\nnot args<arg_key>city</arg_key><arg_value>X</arg_value></tool_call>",
     _call("search", _kv("query", "q"))],
    ["<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>open value"],
    ["<tool_call>\n\n</tool_call>", "<tool_call> \n</tool_call>", "<tool_call>\t\x1c x \n\n<arg_key>k</arg_key>"
     "<arg_value>v</arg_value></tool_call>"],
    ["<think>reasoning ", _call("search", _kv("query", "q"))],  # a call inside reasoning
    ["r</think>\n\n", _call("get_weather", _kv("city", "Paris")), "<user>"],
    [["spell", "<tool_call>"], "get_weather\n", _kv("city", "Paris"), ["spell", "</tool_call>"]],
    [_call("write_file", _kv("content", "1" * 5000))],  # json.loads refuses the digits: vLLM's catch-all
    [_call("write_file", _kv("extra", "1" * 5000))],
    [_call("write_file", _kv("extra", "[" * 2000 + "]" * 2000))],
]
