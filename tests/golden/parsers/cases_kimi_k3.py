"""Kimi K3 outputs: XTML channels out of ``<|open|>``, ``<|close|>`` and
``<|sep|>`` (think, response, tools with call/argument elements), the
generation prefix consumed or not, and their malformed shapes."""

from __future__ import annotations

import json
import random
from typing import Any

from family_cases import CONTENT, REASONING, Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    ("kimi_k3", "kimi_k3"),
    ("kimi_k3", None),
    (None, "kimi_k3"),
    ("deepseek_r1", "kimi_k3"),  # a legacy composition
    ("kimi_k3", "hermes"),  # KimiK3Parser's rules over another family's legacy tool parser
    ("kimi_k3", "qwen3_coder"),  # and over an engine one
]

OP, CL, SEP = "<|open|>", "<|close|>", "<|sep|>"
# The test tokenizer (family_tokens.py): <think> and </think> are DeepSeek V4 added tokens already.
TOKENS = {"special": [OP, CL, SEP, "<|im_end|>"], "added": []}

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "tags": {"type": "array", "items": {
            "type": "string"}}, "opts": {"type": "object"}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "k": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "noargs"}},
]  # fmt: skip


def tag(kind: str, name: str) -> str:
    return f"{OP if kind == 'o' else CL}{name}{SEP}"


def arg(key: str, value: str, kind: str = "string") -> str:
    return f'{OP}argument key="{key}" type="{kind}"{SEP}{value}{tag("c", "argument")}'


def call(name: str, args: str, index: int = 1) -> str:
    return f'{OP}call tool="{name}" index="{index}"{SEP}{args}{tag("c", "call")}'


def tools(*calls: str) -> str:
    return tag("o", "tools") + "".join(calls) + tag("c", "tools")


BENCH = ("kimi_k3", "kimi_k3", tools(call("search", arg("query", "derender streaming") + arg("k", "5", "number"))))
BENCH_OUTPUT = (tag("o", "think"), REASONING, tag("c", "think"), tag("o", "response"), CONTENT, tag("c", "response"),
                BENCH[2], tag("c", "message"))  # bench/stream.py

# KimiK3ReasoningParser: thinking, else enable_thinking, default on.
REQUESTS: list[dict[str, Any]] = [
    {"tools": TOOLS, "chat_template_kwargs": {"thinking": False}},
    {"chat_template_kwargs": {"thinking": False}},
    {"tools": TOOLS, "chat_template_kwargs": {"thinking": None, "enable_thinking": False}},
    {"tools": TOOLS, "chat_template_kwargs": {"thinking": True, "enable_thinking": False}},
]

PROMPTS = [f"user{SEP}weather?{tag('c', 'message')}{tag('o', 'think')}", f"user{SEP}weather?{tag('c', 'message')}",
           f"weather?{tag('o', 'response')}", ""]  # fmt: skip

WORDS = ["hello", " world", "世界", "😀", " ", "\n", "\t", "x", '"', ">", "<", "{", "}", " answer: 42",
         "éß", "\u00a0", "\\", " = ", "/", "&quot;", "&amp;", "|"]  # fmt: skip
NAMES = ["get_weather", "search", "noargs", "unknown_tool", "", "a&quot;b", "get weather", "x&amp;y"]
KEYS = ["city", "days", "tags", "opts", "query", "k", "", "a&quot;b"]
KINDS = ["string", "string", "number", "integer", "boolean", "object", "array", "null", ""]
VALUES = ["Paris", "杭州", "5", " 7 ", "1.5", "true", "null", '["a", "b"]', '{"n": 4}', "a\nb", "", "{bad",
          'quote " and \\ back', "😀", "NaN", "<b>", "-0"]  # fmt: skip


def rand_arg(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.8:
        kind = rng.choice(KINDS)
        type_attr = f' type="{kind}"' if kind else ""
        close = rng.choice([tag("c", "argument")] * 4 + [""])
        return f'{OP}argument key="{rng.choice(KEYS)}"{type_attr}{SEP}{rng.choice(VALUES)}{close}'
    return rng.choice([f"{OP}argument{SEP}x{tag('c', 'argument')}", json.dumps({"k": 1}), "\n"])


def rand_call(rng: random.Random, index: int) -> str:
    attrs = rng.choice([f'tool="{rng.choice(NAMES)}" index="{index}"', f'tool="{rng.choice(NAMES)}"',
                        f'index="{index}"', f"tool={rng.choice(NAMES)}", ""])  # fmt: skip
    sp = rng.choice([" ", " ", " ", "  ", ""])
    body = "".join(rand_arg(rng) for _ in range(rng.randint(0, 3)))
    return f"{OP}call{sp}{attrs}{SEP}{body}" + rng.choice([tag("c", "call")] * 4 + [""]) + rng.choice(["", "", "\n"])


def reasoning(rng: random.Random) -> list[Piece]:
    body = words(rng, [*WORDS, "plan", " step"], 0, 5)
    end = rng.choice([tag("c", "think"), tag("c", "think"), tag("c", "think") + "\n", ""])
    r = rng.random()
    if r < 0.4:
        return [body, end]  # the prompt opened the think channel
    if r < 0.7:
        return [tag("o", "think"), body, end]
    return []


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = reasoning(rng)
    text = rng.choice(["", "Sure. ", "  \n", "中文 ", words(rng, WORDS)])
    shape = rng.random()
    if shape < 0.4:
        pieces += [tag("o", "response"), text, rng.choice([tag("c", "response")] * 3 + [""])]
    elif shape < 0.7:
        pieces += [text, rng.choice([tag("c", "response"), tag("c", "response"), ""])]  # prefix consumed
    else:
        pieces.append(text)
    if rng.random() < 0.6:
        calls = "".join(rand_call(rng, i + 1) for i in range(rng.randint(0, 3)))
        pieces += [rng.choice([tag("o", "tools")] * 4 + [""]), calls, rng.choice([tag("c", "tools")] * 3 + [""])]
    if rng.random() < 0.25:
        pieces.append(rng.choice([tag("o", "think"), tag("c", "think"), tag("o", "response"), tag("c", "response"),
                                  tag("o", "tools"), tag("c", "tools"), OP, CL, SEP, f"{OP} response {SEP}",
                                  tag("o", "response") + "late" + tag("c", "response")]))  # fmt: skip
    pieces.append(rng.choice(["", tag("c", "message"), tag("c", "message"), " tail", words(rng, WORDS)]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


CITY = arg("city", "Paris")
HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], ["r", tag("c", "think"), "Hello"],
    [tag("o", "think"), "plan", tag("c", "think"), tag("o", "response"), "Let me check.", tag("c", "response"),
     tools(call("get_weather", CITY + arg("days", "3", "integer"))), tag("c", "message")],
    ["plan", tag("c", "think"), "Sure", tag("c", "response"), tools(call("search", arg("query", "q"), 1),
                                                                   call("noargs", "", 2)), tag("c", "message")],
    [tag("o", "response"), "only a reply", tag("c", "response"), tag("c", "message")],
    ["still thinking"], [tag("o", "think"), "unclosed"],
    ["a", tag("o", "think"), "b", tag("c", "think"), "c"],
    ["r", tag("c", "think"),
     tools(call("get_weather", arg("opts", '{"n": 1}', "object") + arg("tags", "{bad", "array")))],
    ["r", tag("c", "think"), tools(call('a&quot;b&amp;c', arg("k&amp;", "v")))],
    ["r", tag("c", "think"), tools(call("", CITY), call("search", arg("query", "q")))],
    ["r", tag("c", "think"), tag("o", "tools"), call("search", arg("query", "open"))],
    ["r", tag("c", "think"), tag("o", "tools"), f'{OP}call tool="search"{SEP}', arg("query", "q")],
    ["r", tag("c", "think"), "before ", tools(call("search", "")), " after ", tag("o", "response"), "late",
     tag("c", "response")],
    ["r", tag("c", "think"), "x", tag("c", "response"), "y", tag("c", "response"), tag("c", "message")],
    ["r", tag("c", "think"), f"{OP} tools {SEP}", call("search", arg("query", "q")), tag("c", "tools")],
    [tag("c", "think"), "   ", tools(call("search", arg("query", "q")))],
]
