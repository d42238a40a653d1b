"""Inkling outputs: typed blocks (thinking, text, JSON tool call, raw tool
text, tool error) after ``<|message_model|>`` headers, closed by
``<|end_message|>`` or ``<|content_model_end_sampling|>`` or not, in any
order, with malformed call JSON and truncations."""

from __future__ import annotations

import json
import random

import cases_qwen3 as qwen3
from family_cases import CONTENT, REASONING, Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    ("inkling", "inkling"),
    ("inkling", None),
    (None, "inkling"),
    ("deepseek_r1", "inkling"),  # a legacy composition
]

MODEL, TEXT, THINK = "<|message_model|>", "<|content_text|>", "<|content_thinking|>"
TOOL, TOOL_TEXT, TOOL_ERROR = "<|content_invoke_tool_json|>", "<|content_invoke_tool_text|>", "<|content_tool_error|>"
END_SAMPLING, END = "<|content_model_end_sampling|>", "<|end_message|>"
# Every Inkling marker is a special token of its tokenizer.
TOKENS = {"special": [MODEL, TEXT, THINK, TOOL, TOOL_TEXT, TOOL_ERROR, END_SAMPLING, END], "added": []}
TOOLS = qwen3.TOOLS
# The template prefills the model header (or not, or opens a block).
PROMPTS = [f"weather?{END}{MODEL}", f"weather?{END}", f"weather?{END}{MODEL}{THINK}", f"{MODEL}{TEXT}", ""]

CALL = TOOL + '{"name": "get_weather", "args": {"city": "Paris"}}' + END
BENCH = ("inkling", "inkling", TOOL + '{"name": "search", "args": {"query": "derender streaming", "k": 5}}' + END)
BENCH_OUTPUT = (THINK, REASONING, END, MODEL, TEXT, CONTENT, END, MODEL, BENCH[2])  # bench/stream.py


def call_body(rng: random.Random) -> str:
    if rng.random() < 0.75:
        value: dict[str, object] = {"name": rng.choice([*qwen3.NAMES[:5], "", "unknown"])}
        key = rng.choice(["args", "args", "args", "arguments", "parameters", "input"])
        value[key] = qwen3.json_value(rng) if rng.random() < 0.85 else rng.choice(['{"q": 1}', 5, None, [1]])
        if rng.random() < 0.2:
            value = dict(reversed(list(value.items())))  # the arguments before the name
        return json.dumps(value, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, None, 1]))
    return rng.choice(["{bad", "", '{"name": "search"}', '{"name": 5, "args": {}}', "[1]", '{"args": {"q": 1}}',
                       '{"name": "search", "args": {"query": "}"}', '{"name": "search", "args": {',
                       ' {"name": "search", "args": {}} trailing'])  # fmt: skip


def block(rng: random.Random, first: bool) -> list[Piece]:
    head = "" if first and rng.random() < 0.6 else MODEL
    if rng.random() < 0.1:
        head += rng.choice(["get_weather", "fn ", "\n"])  # a function name in the header
    kind = rng.choice([THINK, THINK, TEXT, TEXT, TOOL, TOOL, TOOL_TEXT, TOOL_ERROR, ""])
    body = call_body(rng) if kind == TOOL else words(rng, [*qwen3.WORDS, "plan", "\n"], 0, 5)
    end = rng.choice([END, END, END, END_SAMPLING, "", "\n"])
    return [head + kind, body, end]


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = []
    if rng.random() < 0.15:
        pieces.append(words(rng, qwen3.WORDS))  # text before any block
    for i in range(rng.randint(0, 4)):
        pieces += block(rng, i == 0)
    if rng.random() < 0.2:
        pieces.append(rng.choice([MODEL, TEXT, THINK, TOOL, END, END_SAMPLING, CALL, " tail", "<think>", "</think>"]))
    return truncate(rng, pieces) if rng.random() < 0.15 else pieces


HANDWRITTEN: list[list[Piece]] = [
    ["plain answer"], [""],
    # vLLM's tests (tests/parser/test_inkling*): thinking, text and tool blocks
    [THINK, "Let me check.", END, MODEL, TEXT, "It is sunny.", END],
    [THINK, "plan", END, MODEL, CALL],
    [THINK, "plan", END, MODEL, TEXT, "Checking.", END, MODEL, CALL, MODEL, TEXT, "Done.", END],
    [CALL, MODEL, CALL.replace("get_weather", "search").replace("city", "query")],
    [TEXT, "hello", END_SAMPLING],
    ["get_weather", TOOL, '{"name": "get_weather", "args": {"city": "Rome"}}', END],
    [THINK, "unclosed reasoning"], [THINK, "r", END, MODEL, "fn_name", END],
    [TOOL, '{"args": {"city": "Paris"}, "name": "get_weather"}', END],
    [TOOL, '{"name": "get_weather", "arguments": {"city": "Paris"}}', END],
    [TOOL, '{"name": "get_weather"}', END], [TOOL, '{"name": "get_weather", "args": "x"}', END],
    [TOOL, '{"name": "get_weather", "args": {"city": "Par', ],
    [TOOL_TEXT, "raw tool text", END, MODEL, TOOL_ERROR, "error text", END],
    [THINK, "a", THINK, "b", TOOL, '{"name": "search", "args": {"query": "q"}}', END],
    [TEXT, "  ", END, MODEL, CALL, MODEL, TEXT, "  ", END],
    [TEXT, "before", END, MODEL, CALL, MODEL, TEXT, " after", END],
]
