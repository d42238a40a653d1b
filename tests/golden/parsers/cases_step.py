"""StepFun outputs: Qwen3's <think> reasoning and XML calls (cases_qwen3.py)
for step3p5 (reasoning stripped of trailing whitespace, always thinking) and
the step5 tool parser (content whitespace kept), plus the step3 / step5
reasoning parsers that are not engines (Step3: up to the first </think>;
step5: DeepSeek R1's)."""

from __future__ import annotations

import random

import cases_qwen3 as q
from family_cases import Piece, truncate, words

__all__ = ["BENCH", "HANDWRITTEN", "PAIRS", "PROMPTS", "TOKENS", "TOOLS", "output"]

TOOLS = q.TOOLS
# Step3's tool block markers are special tokens (kept: a parser is configured).
B, E, CB, CE, SEP = ("<｜tool_calls_begin｜>", "<｜tool_calls_end｜>", "<｜tool_call_begin｜>", "<｜tool_call_end｜>",
                     "<｜tool_sep｜>")  # fmt: skip
TOKENS = {"special": [*q.TOKENS["special"], B, E, CB, CE, SEP], "added": q.TOKENS["added"]}
PROMPTS = q.PROMPTS

PAIRS: list[tuple[str | None, str | None]] = [
    ("step3p5", "step3p5"),
    ("step3p5", None),
    (None, "step3p5"),
    ("step5", "step5"),
    ("step3", "step5"),
    (None, "step5"),
    ("step3", "step3"),
    (None, "step3"),
]

BENCH = ("step3p5", "step3p5", q.BENCH[2])


KEYS = ["city", "days", "query", "k", "detail", "tags", "x", "", "a b"]


def step3_call(rng: random.Random) -> str:
    params = "".join(f'<steptml:parameter name="{rng.choice(KEYS)}">{rng.choice(q.VALUES)}'
                     f'{rng.choice(["</steptml:parameter>", "</steptml:parameter>", ""])}'
                     for _ in range(rng.randint(0, 3)))  # fmt: skip
    name = rng.choice(q.NAMES)
    invoke = f'<steptml:invoke name="{name}">{params}</steptml:invoke>' if rng.random() < 0.9 else "<steptml:invoke>"
    kind = rng.choice(["function", "function", " function\n", "other"])
    return f"{CB}{kind}{rng.choice([SEP, SEP, SEP, ''])}{invoke}{rng.choice([CE, CE, CE, ''])}"


def step3_block(rng: random.Random) -> str:
    calls = "".join(step3_call(rng) for _ in range(rng.randint(0, 3)))
    return rng.choice([B, B, B, ""]) + rng.choice(["", "\n"]) + calls + rng.choice([E, E, E, ""])


def output(rng: random.Random) -> list[Piece]:
    if rng.random() < 0.3:
        pieces: list[Piece] = [rng.choice(["", "r</think>", "<think>r</think>\n"]), rng.choice(["", " Sure. ", "\n"])]
        pieces += [step3_block(rng), rng.choice(["", " after", "\n", words(rng, q.WORDS)])]
        return truncate(rng, pieces) if rng.random() < 0.1 else pieces
    pieces = q.output(rng)
    if rng.random() < 0.3:  # Step closes reasoning with "\n</think>\n"
        pieces = ["<think>\n" if rng.random() < 0.3 else "", words(rng, q.WORDS), "  \n</think>\n", *pieces[-3:]]
        pieces = [p for p in pieces if p != ""]
    return truncate(rng, pieces) if rng.random() < 0.05 else pieces


HANDWRITTEN: list[list[Piece]] = [
    *q.HANDWRITTEN,
    ["plan \n\n</think>\n", "  \n", q._call("get_weather", q.P_CITY), "\n\n"],
    ["plan\n</think>\n\n", q._call("get_weather", q.P_CITY), " \n ",
     q._call("search", "<parameter=query>\nq\n</parameter>\n")],
    ["</think>\n\n  Hello  \n", q._call("noargs", ""), "  tail  "],
    ["<think>\n\nplan\n\n</think>\n\n"],
    ["a</think>b</think>c<think>d"],
    ["r</think>  Let me check. ", B, CB, "function", SEP, '<steptml:invoke name="get_weather">',
     '<steptml:parameter name="city"> Paris </steptml:parameter><steptml:parameter name="days">5</steptml:parameter>',
     "</steptml:invoke>", CE, CB, "function", SEP, '<steptml:invoke name="search"></steptml:invoke>', CE, E,
     "  done \n"],
    ["r</think>", B, CB, "other", SEP, '<steptml:invoke name="get_weather"></steptml:invoke>', CE, E, " kept"],
    ["r</think>\n", B, CB, "function", SEP, '<steptml:invoke name="search">'],
    ["r</think>", B, CB, "function", SEP, '<steptml:invoke name="unknown_tool"><steptml:parameter name="x">1',
     "</steptml:parameter></steptml:invoke>", CE, E],
]
