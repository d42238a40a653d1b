"""MiniMax M2 outputs: reasoning the template opened, closed by </think>,
then <minimax:tool_call><invoke name="..."><parameter name="...">..</parameter></invoke>
blocks (quoted, single-quoted and bare names), and their malformed shapes."""

from __future__ import annotations

import random

from cases_qwen3 import TOOLS, VALUES, WORDS
from family_cases import Piece, truncate, words

__all__ = ["BENCH", "HANDWRITTEN", "PAIRS", "PROMPTS", "TOKENS", "TOOLS", "output"]

PAIRS: list[tuple[str | None, str | None]] = [
    ("minimax_m2", "minimax_m2"),
    ("minimax_m2", None),
    (None, "minimax_m2"),
    ("minimax_m2_append_think", "minimax_m2"),
    ("minimax_m2_append_think", None),
]

# MiniMax's message markers are special tokens; its tool block tags are added tokens.
TOKENS = {"special": ["]~!b[", "]~b]", "[e~["], "added": ["<minimax:tool_call>", "</minimax:tool_call>"]}

BENCH = ("minimax_m2", "minimax_m2", '<minimax:tool_call>\n<invoke name="search">\n<parameter name="query">'
         'derender streaming</parameter>\n<parameter name="k">5</parameter>\n</invoke>\n</minimax:tool_call>')

HEAD = "]~!b[]~b]system\nYou can call tools.[e~[\n]~b]user\nweather?[e~[\n]~b]ai\n"
PROMPTS = [HEAD + "<think>\n", HEAD, HEAD + "<think>\nr\n</think>\n\n", ""]

NAMES = ['"get_weather"', '"search"', '"noargs"', '"set_config"', '"unknown_tool"', '""', "'search'", "get_weather",
         '" search "', '"get weather"', "'get_weather"]  # fmt: skip
KEYS = ['"city"', '"days"', '"unit"', '"detail"', '"tags"', '"opts"', '"query"', '"k"', '"port"', '"count"',
        '"enabled"', "'city'", "city", '""', '" city "', '"x']  # fmt: skip
M2_VALUES = [*VALUES, "</parameter", "<parameter", " spaced ", "a</invoke>b"]


def m2_param(rng: random.Random) -> str:
    close = rng.choice(["</parameter>", "</parameter>", "</parameter>", "", "</ parameter>"])
    return f"<parameter name={rng.choice(KEYS)}>{rng.choice(M2_VALUES)}{close}{rng.choice(['', chr(10)])}"


def m2_invoke(rng: random.Random) -> str:
    params = "".join(m2_param(rng) for _ in range(rng.randint(0, 4)))
    name = rng.choice(NAMES)
    gt = rng.choice([">", ">\n", ">\n"]) if name[:1] in "\"'" and name[-1:] == name[:1] else rng.choice([">", " >"])
    end = rng.choice(["</invoke>\n", "</invoke>\n", "</invoke>", ""])
    return f"<invoke name={name}{gt}{params}{end}"


def m2_block(rng: random.Random) -> str:
    invokes = "".join(m2_invoke(rng) for _ in range(rng.randint(1, 3)))
    head = rng.choice(["<minimax:tool_call>\n", "<minimax:tool_call>", "<minimax:tool_call>\n", ""])
    tail = rng.choice(["</minimax:tool_call>", "</minimax:tool_call>", "</minimax:tool_call>\n", ""])
    return head + invokes + tail


def reasoning(rng: random.Random) -> list[Piece]:
    body = words(rng, [*WORDS, "plan", " step"], 0, 5)
    end: Piece = rng.choice(["</think>", "</think>\n\n", "\n</think>\n\n", ["spell", "</think>"], ""])
    return [body, end] if rng.random() < 0.75 else ["<think>", body, end]


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = reasoning(rng) if rng.random() < 0.85 else []
    pieces.append(rng.choice(["", "\n", "Sure. ", "  \n", "中文 ", words(rng, WORDS)]))
    for _ in range(rng.randint(0, 2)):
        pieces.append(m2_block(rng))
        pieces.append(rng.choice(["", "\n", " ", "between "]))
    if rng.random() < 0.25:
        pieces.append(rng.choice(["<minimax:tool_call>", "</minimax:tool_call>", '<invoke name="search">',
                                  "</invoke>", "</think>", "<think>", "[e~[", "]~b]", ">", ["spell", "</think>"]]))
    pieces.append(rng.choice(["", " tail", "\n", words(rng, WORDS)]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


def _block(*invokes: str) -> str:
    return "<minimax:tool_call>\n" + "".join(invokes) + "</minimax:tool_call>"


def _invoke(name: str, params: dict[str, str]) -> str:
    body = "".join(f'<parameter name="{k}">{v}</parameter>\n' for k, v in params.items())
    return f'<invoke name="{name}">\n{body}</invoke>\n'


HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], ["r</think>\n\nHello"], ["<think>r</think>Hello"],
    ["r</think>\n\nHello ", _block(_invoke("get_weather", {"city": "Seattle", "days": "5"})), " after"],
    ["r</think>", _block(_invoke("get_weather", {"city": "a"}), _invoke("search", {"query": "q"}))],
    ["r</think>", _block('<invoke name="get_weather">\n<parameter name="city">a</parameter>\n'
                         '<parameter name="city">b</parameter>\n</invoke>\n')],
    ["r</think>", '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">open value'],
    ["r</think>", '<minimax:tool_call>\n<invoke name="get_wea'],
    ["reasoning ", _block(_invoke("search", {"query": "q"}))],  # the tool block ends reasoning
    ["r</think>", _block('<invoke name="noargs">\n</invoke>\n')],
    ["r</think>", _block("<invoke name='search'>\n<parameter name='query'>q</parameter>\n</invoke>\n")],
    ["r</think>", _block("<invoke name=search>\n<parameter name=query>q</parameter>\n</invoke>\n")],
    ["r</think>", _block('<invoke name="search">\n<parameter name="query">a<parameter name="k">5</invoke>\n')],
    ["r</think>", _block(_invoke("unknown_tool", {"city": "x"})), " kept?"],
    ["r</think>", _block(_invoke(" search ", {"query": "q"}))],
    ["r</think>x</think>y<think>z"],
    ["r", ["spell", "</think>"], "\n\nspelled end"],
    ["r</think>[e~[a]~b]b"],
    ["r</think>  \n", _block(_invoke("get_weather", {"city": "Seattle"})), "  "],
    ["r</think>", _block(_invoke("get_weather", {"opts": '{"n": "4"}', "tags": '["a"]', "detail": "true",
                                                 "ratio": "1.5"}))],
    ["r</think>", _block(_invoke("set_config", {"port": "8080", "count": "42", "value": "null", "enabled": "true"}))],
    ["r</think>", '<invoke name="search">\n<parameter name="query">no block</parameter>\n</invoke>\n'],
    ["r</think>text </minimax:tool_call> more"],
    ["r</think>", _block(_invoke("search", {"query": " spaced\nvalue "})), "\nafter block"],
    ["<think>\nI should call it.\n</think>\n\n", _block(_invoke("get_weather", {"city": "Seattle"})), "[e~["],
]
