"""MiniMax M3 outputs: <mm:think> reasoning (opened by the output, or by the
template with thinking_mode "enabled"), then a ]<]minimax[>[<tool_call> block
of ]<]minimax[>[<invoke name="..."> calls whose parameters are nested
]<]minimax[>[<name>...]<]minimax[>[</name> elements, and their malformed shapes."""

from __future__ import annotations

import random
from typing import Any

from cases_qwen3 import TOOLS as QWEN3_TOOLS
from cases_qwen3 import WORDS
from family_cases import Piece, truncate, words

__all__ = ["BENCH", "HANDWRITTEN", "PAIRS", "PROMPTS", "REQUESTS", "TOKENS", "TOOLS", "output"]

PAIRS: list[tuple[str | None, str | None]] = [
    ("minimax_m3", "minimax_m3"),
    ("minimax_m3", None),
    (None, "minimax_m3"),
    ("deepseek_r1", "minimax_m3"),
]

# MiniMax's message markers are special tokens; the namespace marker and the
# think tags are ordinary added tokens (vLLM: "non-special added tokens").
TOKENS = {"special": ["]~!b[", "]~b]", "[e~["], "added": ["]<]minimax[>[", "<mm:think>", "</mm:think>"]}

TOOLS: list[dict[str, Any]] = [*QWEN3_TOOLS, {"type": "function", "function": {"name": "create_order", "parameters": {
    "type": "object", "properties": {
        "user_id": {"type": "integer"},
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "sku": {"type": "string"}, "qty": {"type": "integer"}}}},
        "meta": {"type": "object", "additionalProperties": {"type": "number"}},
        "note": {"anyOf": [{"type": "null"}, {"type": "array", "items": {"type": "string"}}]},
        "shipping": {"type": "object", "properties": {"zip": {"type": "integer"}}},
        "either": {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "string"}]},
        "free": {"type": "object"}}}}}]  # fmt: skip

REQUESTS: list[dict[str, Any]] = [
    {"tools": TOOLS, "chat_template_kwargs": {"thinking_mode": "enabled"}},
    {"chat_template_kwargs": {"thinking_mode": "enabled"}},
    {"tools": TOOLS, "chat_template_kwargs": {"thinking_mode": "disabled"}},
]

NS = "]<]minimax[>["


def el(name: str, body: str) -> str:
    return f"{NS}<{name}>{body}{NS}</{name}>"


def _nested(depth: int) -> str:
    body = "v"
    for _ in range(depth - 1):
        body = el("n", body)
    return el("free", body)


def invoke(name: str, params: str, quote: str = '"') -> str:
    return f"{NS}<invoke name={quote}{name}{quote}>{params}{NS}</invoke>"


def block(*invokes: str) -> str:
    return f"{NS}<tool_call>\n" + "\n".join(invokes) + f"\n{NS}</tool_call>"


BENCH = ("minimax_m3", "minimax_m3", block(invoke("search", el("query", "derender streaming") + el("k", "5"))))

HEAD = "]~!b[]~b]system\nYou can call tools.[e~[\n]~b]user\nweather?[e~[\n]~b]ai\n"
PROMPTS = [HEAD, HEAD + "<mm:think>", HEAD + "<mm:think>r</mm:think>", ""]

NAMES = ["get_weather", "search", "noargs", "set_config", "create_order", "unknown_tool", "", " search ",
         "get weather"]  # fmt: skip
KEYS = ["city", "days", "unit", "detail", "ratio", "tags", "opts", "query", "k", "port", "count", "value",
        "enabled", "user_id", "items", "meta", "note", "shipping", "either", "free", "zip", "x", " city ",
        "$text"]  # fmt: skip
SCALARS = ["Paris", "杭州", "5", " 7 ", "-1e3", "1.5", "true", "null", "", " ", "a\nb", "1e400", "NaN", '["a"]',
           '{"n": 4}', "<b>", "a>b", "]<]mini"]  # fmt: skip


def param(rng: random.Random, depth: int = 0) -> str:
    key = rng.choice(KEYS)
    r = rng.random()
    if r < 0.6 or depth > 1:
        body = rng.choice(SCALARS)
    elif r < 0.8:
        body = "".join(el("item", rng.choice(SCALARS) if rng.random() < 0.6 else param(rng, depth + 2))
                       for _ in range(rng.randint(0, 3)))
    else:
        body = "".join(param(rng, depth + 1) for _ in range(rng.randint(1, 3)))
        body += rng.choice(["", "", "mixed text"])
    close = rng.choice([f"{NS}</{key}>"] * 6 + ["", f"{NS}</other>", f"</{key}>"])
    return f"{NS}<{key}>{body}{close}{rng.choice(['', '', chr(10)])}"


def call(rng: random.Random) -> str:
    quote = rng.choice(['"', '"', '"', "'", ""])
    params = "".join(param(rng) for _ in range(rng.randint(0, 3)))
    end = rng.choice([f"{NS}</invoke>"] * 4 + [""])
    return f"{NS}<invoke name={quote}{rng.choice(NAMES)}{quote}>\n{params}{end}"


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = []
    r = rng.random()
    body = words(rng, [*WORDS, "plan", " step"], 0, 5)
    if r < 0.35:
        pieces += ["<mm:think>", body, rng.choice(["</mm:think>", "</mm:think>\n", "", ["spell", "</mm:think>"]])]
    elif r < 0.6:
        pieces += [body, rng.choice(["</mm:think>", "</mm:think>\n\n"])]  # the template opened it
    elif r < 0.68:
        pieces += ["</mm:think>"]  # a stray closer first
    pieces.append(rng.choice(["", "\n", "Sure. ", "  \n", "中文 ", words(rng, WORDS)]))
    if rng.random() < 0.7:
        calls = [call(rng) for _ in range(rng.randint(0, 3))]
        head = rng.choice([f"{NS}<tool_call>\n"] * 4 + [""])
        tail = rng.choice([f"\n{NS}</tool_call>"] * 4 + ["", f"\n{NS}</tool_call> after"])
        pieces.append(head + "\n".join(calls) + tail)
    if rng.random() < 0.25:
        pieces.append(rng.choice([f"{NS}<tool_call>", f"{NS}</invoke>", NS, "<mm:think>", "</mm:think>", "[e~[",
                                  "]~b]", ">", ["spell", NS]]))
    pieces.append(rng.choice(["", " tail", "\n", words(rng, WORDS)]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


# vLLM's tests/parser/test_minimax_m3.py and tests/reasoning/test_minimax_m3_reasoning_parser.py shapes.
HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], ["<mm:think>r</mm:think>Hello"], ["r</mm:think>Hello"], ["</mm:think>Hello"],
    ["</mm:think>"], ["a<mm:think>r"], ["a</mm:think>b<mm:think>r</mm:think>c</mm:think>d"],
    ["<mm:think>r</mm:think>", block(invoke("get_weather", el("city", "Paris") + el("days", "3")))],
    [block(invoke("create_order", el("user_id", "42") + el("items", el("item", el("sku", "book-001")
                                                                      + el("qty", "2")))))],
    [block(invoke("create_order", el("items", "") + el("meta", el("a", "1.5") + el("b", "x"))
                  + el("note", "")))],
    [block(invoke("get_weather", el("tags", "a") + el("tags", "b") + el("tags", "c")))],  # repeated: a list
    [block(invoke("get_weather", el("opts", el("n", "4") + "mixed")))],
    [block(invoke("search", el("query", "q"), "'"), invoke("noargs", "", ""))],
    [block(invoke("search", el("query", "q") + f"{NS}<k>5"))],  # unterminated: the parameters before it
    ["Let me check.\n", block(invoke("search", el("query", "q"))), " dropped after the block"],
    [f"{NS}<tool_call>\n{NS}<invoke name=\"search\">{el('query', 'open')}"],  # cut before </invoke>
    [f"{NS}<invoke name=\"search\">{el('query', 'q')}{NS}</invoke>"],  # no block: content
    [f"x {NS}<tool_call> y {NS}</tool_call> z"], ["a >b ]<]minimax[ c"],
    [block(invoke(" search ", el("query", "q")))], [block(invoke("", el("x", '{"name": "search"}')))],
    ["<mm:think>", block(invoke("search", el("query", "inside reasoning"))), "</mm:think>after"],
    [block(invoke("create_order", el("tags", el("item", "a") + el("item", "b")) + el("shipping", el("zip", "018956"))
                  + el("either", el("item", "1") + el("item", "2")) + el("free", el("t", "x") + el("t", "y"))))],
    [block(invoke("create_order", el("shipping", "") + el("either", "") + el("free", "hi " + el("k", "v") + " there")
                  + el("note", "x" + el("$text", "child"))))],
    [block(invoke("create_order", el("user_id", "1") + "junk" + el("note", "dropped")))],
    [block(invoke("create_order", el("user_id", "1") + f"{NS}<note>a{NS}</other>"))],
    [block(invoke("create_order", _nested(128)))],  # the depth limit
    [block(invoke("create_order", el("user_id", "2") + _nested(129)))],  # too deep: dropped
    [block(invoke("other", el("n", "1") + el("list", el("item", "a") + el("item", "b"))))],
    ["pre", block(invoke("create_order", "")), "post"],
]
