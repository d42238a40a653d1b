"""Qwen3 outputs: <think> reasoning, XML tool calls (qwen3_coder/qwen3_xml),
Hermes JSON calls (hermes/qwen3_json), and their malformed shapes."""

from __future__ import annotations

import json
import random
from typing import Any

from family_cases import Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    ("qwen3", "qwen3_coder"),
    ("qwen3", "qwen3_xml"),
    ("qwen3", "hermes"),
    ("qwen3", "qwen3_json"),
    ("qwen3", None),
    (None, "qwen3_coder"),
    ("deepseek_r1", "qwen3_coder"),
]

# The test tokenizer (family_tokens.py): <think> and </think> are DeepSeek V4 added tokens already.
TOKENS = {"special": ["<|im_start|>", "<|im_end|>", "<|endoftext|>"], "added": ["<tool_call>", "</tool_call>"]}

# bench/stream.py --families qwen3: the parsers and the tool call of its generation.
BENCH = ("qwen3", "qwen3_coder", "<tool_call>\n<function=search>\n<parameter=query>\nderender streaming\n"
         "</parameter>\n<parameter=k>\n5\n</parameter>\n</function>\n</tool_call>")

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "unit": {"type": "string", "enum": ["c", "f"]},
        "detail": {"type": ["boolean", "null"]}, "ratio": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "opts": {"type": "object", "properties": {"n": {"type": "integer"}}}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "k": {"type": "int"}}}}},
    {"type": "function", "function": {"name": "noargs"}},
    {"type": "function", "function": {"name": "set_config", "parameters": {"type": "object", "properties": {
        "port": {"anyOf": [{"type": "string"}, {"type": "null"}]}, "count": {"type": "integer"},
        "value": {"type": ["integer", "null"]}, "enabled": {"type": "boolean"}}}}},
]  # fmt: skip

IM = "<|im_start|>"
PROMPTS = [
    f"{IM}user\nweather?<|im_end|>\n{IM}assistant\n",
    f"{IM}user\nweather?<|im_end|>\n{IM}assistant\n<think>\n",
    f"{IM}user\nweather?<|im_end|>\n{IM}assistant\n<think>\n\n</think>\n\n",
    "",
]

WORDS = ["hello", " world", "世界", "😀", " ", "\n", "\t", "x", '"', ">", "<", "{", "}", " answer: 42",
         "éß", "\u00a0", "\x1c", "\\", "\\n", " = ", "/"]  # fmt: skip
NAMES = ["get_weather", "search", "noargs", "set_config", "unknown_tool", "", " search ", "get weather"]
KEYS = ["city", "days", "unit", "detail", "ratio", "tags", "opts", "query", "k", "port", "count", "value",
        "enabled", "x", ""]  # fmt: skip
VALUES = ["Paris", "杭州", "5", " 7 ", "-1e3", "1.5", "true", "null", "c", '["a", "b"]', '{"n": "4"}',
          "a\nb", "\n", "", 'quote " and \\ back', "😀", "{bad", "<b>", "a>b", "1e400", "NaN"]  # fmt: skip


def xml_param(rng: random.Random) -> str:
    value = rng.choice(VALUES)
    nl = rng.choice(["\n", "", "\n\n"])
    close = rng.choice(["</parameter>", "</parameter>", "</parameter>", "", "</ parameter>"])
    return f"<parameter={rng.choice(KEYS)}>{nl}{value}{nl}{close}\n"


def xml_call(rng: random.Random) -> str:
    params = "".join(xml_param(rng) for _ in range(rng.randint(0, 4)))
    func_close = rng.choice(["</function>\n", "</function>\n", "</function>\n", ""])
    head = rng.choice(["<tool_call>\n", "<tool_call>\n", "<tool_call>", ""])
    tail = rng.choice(["</tool_call>", "</tool_call>", "</tool_call>\n", ""])
    name = rng.choice(NAMES)
    gt = rng.choice([">\n", ">\n", ">", "\n"])
    return f"{head}<function={name}{gt}{params}{func_close}{tail}"


def json_value(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if depth > 2 or r < 0.4:
        return rng.choice([1, -2.5, "s", "é😀", None, True, 1e20, 'a"b', "line\nbreak", "</tool_call>"])
    if r < 0.7:
        return {rng.choice(KEYS) or "k": json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    return [json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]


def hermes_call(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.8:
        body = json.dumps({"name": rng.choice(NAMES[:5]), "arguments": json_value(rng)},
                          ensure_ascii=rng.random() < 0.5)
    elif r < 0.88:
        body = json.dumps({"name": rng.choice([1, None, "a"]), "arguments": json_value(rng)})
    else:
        body = rng.choice(["{bad", "", " ", "[1]", '"s"', '{"name":"search","arguments":{}} x', '{"name": "a"}'])
    return ("<tool_call>" + rng.choice(["", "\n", " "]) + body
            + rng.choice(["\n</tool_call>", "</tool_call>", "", "</tool_"]))


def reasoning(rng: random.Random) -> list[Piece]:
    r = rng.random()
    body = words(rng, [*WORDS, "plan", " step"], 0, 5)
    end: Piece = rng.choice(["</think>", "</think>\n\n", "\n</think>\n\n", ["spell", "</think>"], ""])
    if r < 0.5:
        return [body, end]  # the template opened <think>
    if r < 0.8:
        return ["<think>", body, end]
    return []


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = reasoning(rng)
    pieces.append(rng.choice(["", "\n\n", "Sure. ", "  \n", "中文 ", words(rng, WORDS)]))
    kind = rng.random()
    calls = rng.randint(0, 3)
    for _ in range(calls):
        pieces.append(xml_call(rng) if kind < 0.6 else hermes_call(rng))
        pieces.append(rng.choice(["", "\n", " ", "\n\n"]))
    if rng.random() < 0.25:
        pieces.append(rng.choice(["<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=x>",
                                  "</think>", "<think>", "<|im_end|>", "<|endoftext|>", ">", ["spell", "<tool_call>"]]))
    pieces.append(rng.choice(["", " tail", "\n", words(rng, WORDS)]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


def _call(name: str, params: str) -> str:
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


P_CITY = "<parameter=city>\nParis\n</parameter>\n"
P_DAYS = "<parameter=days>\n5\n</parameter>\n"
HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], ["r</think>\n\nHello"], ["<think>r</think>\n\nHello"],
    ["r</think>\n\nHello ", _call("get_weather", P_CITY + P_DAYS), " after"],
    ["r</think>\n\n", _call("get_weather", P_CITY), "\n", _call("search", "<parameter=query>\nq\n</parameter>\n")],
    ["r</think>\n\n", _call("get_weather", "<parameter=city>\na\n</parameter>\n<parameter=city>\nb\n</parameter>\n")],
    ["r</think>", _call("get_weather", "<parameter=city>\nopen value")],
    ["r</think>", "<tool_call>\n<function=get_weather>\n<parameter=city>\nX"],
    ["r</think>", "<tool_call>\n<function=get_wea"],
    ["r</think>text <function=search>\n<parameter=query>\nq\n</parameter>\n</function>"],
    ["reasoning ", _call("search", "<parameter=query>\nq\n</parameter>\n")],  # a call ends reasoning
    ["r</think>\n\nHello <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"],
    ["r</think>", _call("", '{"name": "search", "arguments": {"query": "q"}}')],
    ["r</think>", _call("  ", "")],
    ["r</think>", _call("noargs", "")],
    ["r</think>x</think>y<think>z"],
    ["r", ["spell", "</think>"], "\n\nspelled end"],
    ["r</think><|im_end|>a<|endoftext|>b"],
    ["r</think>  \n", _call("get_weather", P_CITY), "  "],
    ["r</think>", _call("get_weather", "<parameter=opts>\n{\"n\": \"4\"}\n</parameter>\n<parameter=tags>\n[\"a\"]\n"
                                       "</parameter>\n<parameter=detail>\ntrue\n</parameter>\n")],
    ["r</think>", "<tool_call>\n<function=search>\n<parameter=query>\na</tool_call>b\n</function>"],
    ["r</think>", "<tool_call>\n<function=search</tool_call>after"],
    ["r</think>", "<tool_call>\n<function=search<function=get_weather>\n", P_CITY, "</function>"],
    # vLLM's tests/parser/engine/test_qwen3.py shapes
    ["</think>", _call("set_config", "<parameter=port>8080</parameter>\n<parameter=count>42</parameter>\n"
                                    "<parameter=value>null</parameter>\n<parameter=enabled>true</parameter>\n")],
    ["</think>", _call("get_weather", "<parameter=ratio>5.0</parameter>\n<parameter=days>3.0</parameter>\n")],
    ["</think>", _call("Bash", '<parameter=path>C:\\Users\\file.txt</parameter>\n<parameter=q>He said "hi"'
                               "</parameter>\n<parameter=command>\nls -la /tmp\nfind . | head\n</parameter>\n")],
    ["</think>Let me check.\n\n", "<tool_call>\n<function=get_weather>\n", P_CITY, "</function>\n",
     "<tool_call>\n<function=get_weather>\n<parameter=city>Tokyo</parameter>\n</function>\n</tool_call>",
     "\n\nI will get that."],
    ["</think>", _call("ask", '<parameter=questions>[{"question": "Pick", "multiSelect": false, "answer": null}]'
                              "</parameter>\n")],
    ["<think>\nI should call it.\n</think>\n\n", _call("get_weather", P_CITY), "<|im_end|>"],
]
