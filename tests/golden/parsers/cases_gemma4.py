"""Gemma 4 outputs: <|channel>thought reasoning (opened by the output, or
implied by a stray <channel|> or a "thought" start), <|tool_call>call:name{...}
<tool_call|> calls with <|"|> strings, bare values, nested objects and arrays,
and their malformed shapes."""

from __future__ import annotations

import random
from typing import Any

from cases_qwen3 import TOOLS, WORDS
from family_cases import CONTENT, REASONING, Piece, truncate, words

__all__ = ["BENCH", "HANDWRITTEN", "PAIRS", "PROMPTS", "REQUESTS", "TOKENS", "TOOLS", "output"]

PAIRS: list[tuple[str | None, str | None]] = [
    ("gemma4", "gemma4"),
    ("gemma4", None),
    (None, "gemma4"),
    ("deepseek_r1", "gemma4"),
]

# Gemma 4's control tokens are special (vLLM's engine drops those that are
# no terminal, but keeps the <|"|> string delimiter).
TOKENS = {
    "special": ["<|turn>", "<turn|>", "<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", '<|"|>',
                "<|tool_response>", "<tool_response|>", "<|tool>", "<tool|>", "<|think|>"],
    "added": [],
}  # fmt: skip

REQUESTS: list[dict[str, Any]] = [
    {"tools": TOOLS, "chat_template_kwargs": {"enable_thinking": True}},
    {"chat_template_kwargs": {"enable_thinking": True}},
]

Q = '<|"|>'
BENCH = ("gemma4", "gemma4", f"<|tool_call>call:search{{query:{Q}derender streaming{Q},k:5}}<tool_call|>")
BENCH_OUTPUT = ("<|channel>thought\n", REASONING, "<channel|>", "\n\n", CONTENT, BENCH[2])  # bench/stream.py

TURN = "<|turn>user\nweather?<turn|>\n<|turn>model\n"
PROMPTS = [
    TURN,
    "<|turn>system\n<|think|>You can call tools.<turn|>\n" + TURN,  # thinking on
    TURN + "<|channel>thought\n",  # the template opened reasoning
    TURN + f"<|tool_call>call:get_weather{{city:{Q}Paris{Q}}}<tool_call|><|tool_response>response:get_weather"
    f"{{temp:20}}<tool_response|>",  # after a tool response
    TURN + "<|channel>thought\n<channel|>",  # thinking closed
    "",
]

NAMES = ["get_weather", "search", "noargs", "set_config", "unknown_tool", "", " search ", "get weather", "a.b"]
KEYS = ["city", "days", "unit", "detail", "ratio", "tags", "opts", "query", "k", "port", "count", "value",
        "enabled", "x", "", " city ", f"{Q}city{Q}"]  # fmt: skip
BARE = ["5", " 7 ", "-1e3", "1.5", "2.", "true", "false", "null", "c", "1e400", "NaN", "a b", "x:y", ""]
STRINGS = ["Paris", "杭州", "a\nb", "", 'quote " and \\ back', "😀", "{bad", "a,b", "a:b", "[x]", "}", "<b>",
           "<tool_call|>", "<channel|>", "call:f{"]  # fmt: skip


def value(rng: random.Random, depth: int = 0, words: tuple[str, list[str], list[str], list[str]] | None = None) -> str:
    """A Gemma-style value (``words``: the string quote, strings, bare values
    and keys; FunctionGemma's cases pass their own)."""
    quote, strings, bare, _ = words or (Q, STRINGS, BARE, KEYS)
    r = rng.random()
    if r < 0.45:
        return f"{quote}{rng.choice(strings)}{quote}"
    if r < 0.75 or depth > 1:
        return rng.choice(bare)
    if r < 0.87:
        items = ",".join(value(rng, depth + 1, words) for _ in range(rng.randint(0, 3)))
        return f"[{items}{rng.choice([']', ']', ''])}"
    return "{" + args(rng, depth + 1, words) + rng.choice(["}", "}", ""])


def args(rng: random.Random, depth: int = 0, words: tuple[str, list[str], list[str], list[str]] | None = None) -> str:
    keys = (words or (Q, STRINGS, BARE, KEYS))[3]
    sep = rng.choice([",", ",", ", ", ",\n"])
    pairs = [f"{rng.choice(keys)}:{rng.choice(['', '', ' '])}{value(rng, depth, words)}"
             for _ in range(rng.randint(0, 3))]
    return sep.join(pairs)


def call(rng: random.Random) -> str:
    head = rng.choice(["<|tool_call>call:", "<|tool_call>call:", "<|tool_call>call:", "<|tool_call>:",
                       "<|tool_call> call:", "<|tool_call>x"])  # fmt: skip
    opener, closer = rng.choice([("{", "}"), ("{", "}"), ("{", "}"), ("(", ")"), ("{", "")])
    tail = rng.choice(["<tool_call|>", "<tool_call|>", "<tool_call|>", "<tool_call|>\n", "<turn|>", ""])
    return f"{head}{rng.choice(NAMES)}{opener}{args(rng)}{closer}{tail}"


def reasoning(rng: random.Random) -> list[Piece]:
    body = words(rng, [*WORDS, "plan", " step", "thought"], 0, 5)
    r = rng.random()
    if r < 0.4:
        return ["<|channel>", rng.choice(["thought\n", "thought\n", "thought", "", "thought\n\n"]), body,
                rng.choice(["<channel|>", "<channel|>", "<channel|>\n", ""])]  # fmt: skip
    if r < 0.5:
        return [rng.choice(["thought\n", "thought"]), body, rng.choice(["<channel|>", ""])]  # no opener
    if r < 0.58:
        return [body, "<channel|>"]  # a stray closer: all before it is reasoning
    return []


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = reasoning(rng)
    pieces.append(rng.choice(["", "\n", "Sure. ", "  \n", "中文 ", words(rng, WORDS), "thought\nnot reasoning "]))
    for _ in range(rng.randint(0, 3)):
        pieces.append(call(rng))
        pieces.append(rng.choice(["", "\n", " ", "between "]))
    if rng.random() < 0.25:
        pieces.append(rng.choice(["<|tool_call>", "<tool_call|>", "<channel|>", "<|channel>", "<turn|>", "<|turn>",
                                  Q, "call:", ["spell", "<channel|>"], ["spell", "<|tool_call>"]]))
    pieces.append(rng.choice(["", " tail", "\n", words(rng, WORDS)]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


def _call(name: str, body: str = "", head: str = "call:") -> str:
    return f"<|tool_call>{head}{name}{{{body}}}<tool_call|>"


HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], ["thought"], ["thought\n"], ["thought\nreasoning only"],
    ["<|channel>thought\nI should check.<channel|>The answer is 42."],
    ["<|channel>thought\n<channel|>Hello"], ["<|channel>thought<channel|>Hello"],
    ["reasoning then<channel|>answer"], ["<channel|>answer"],
    ["answer<channel|>more<|channel>x<channel|>y"],
    [_call("get_weather", f"location:{Q}Tokyo{Q}")],
    [_call("get_weather", f"location:{Q}San Francisco{Q},unit:{Q}celsius{Q}")],
    [_call("set_config", "count:42,enabled:true")],
    [_call("get_weather", f"opts:{{n:{Q}4{Q}}},tags:[{Q}a{Q},{Q}b{Q}]")],
    [_call("search", f"query:{Q}He said \"hi\" {{x}}{Q}")],
    ["Let me check.", _call("get_weather", f"city:{Q}Paris{Q}"), _call("search", f"query:{Q}q{Q},k:5")],
    ["<|channel>thought\nneed weather<channel|>", _call("get_weather", f"city:{Q}London{Q}")],
    ["<|channel>thought\nno close ", _call("get_weather", f"city:{Q}Rome{Q}")],  # a call ends reasoning
    ["<|tool_call>:get_weather{city:", Q, "Oslo", Q, "}<tool_call|>"],  # a bare colon opener
    ["<|tool_call>call:get_weather(city:", Q, "Oslo", Q, ")<tool_call|>"],
    ["<|tool_call>call:get_weather{city:", Q, "Par"],  # cut mid-value
    ["<|tool_call>call:get_weather{ratio:1.", ],
    ["<|tool_call>call:get_weather{days:3}<turn|>"],
    ["<|tool_call>call:noargs{}<tool_call|>"], ["<|tool_call>call:noargs<tool_call|>"],
    ["<|tool_call>call:{x:1}<tool_call|>"], ["<|tool_call><tool_call|>after"],
    [_call("unknown_tool", f"city:{Q}Paris{Q}"), " kept?"],
    ["text <tool_call|> and <channel|> strays"],
    ["a", ["spell", "<|tool_call>"], "call:search{}", ["spell", "<tool_call|>"]],
    ["<|channel>thought\nr<channel|>thought\nnot reasoning"],  # the tool pass opens reasoning again
    ["<|channel>thought\n", _call("search", f"query:{Q}in reasoning{Q}"), "<channel|>done"],
    [_call("get_weather", f"tags:[{Q}a{Q},[1,2],{{k:v}}],opts:{{n:5,deep:{{x:[]}}}}")],
    [_call("get_weather", "city:,days:2")],
]
