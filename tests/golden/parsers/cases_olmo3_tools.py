"""Olmo 3 tool calls (``olmo3`` tools, ``olmo3_tools.py``): Python calls one a
line, bare or inside ``<function_calls>...</function_calls>`` (anywhere in
the output), ``null``/``true``/``false`` literals, and what makes them content;
alone, after ``olmo3`` reasoning and after ``deepseek_r1``."""

from __future__ import annotations

import random

import cases_pythonic as py
from family_cases import CONTENT, REASONING, Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    (None, "olmo3"),
    ("olmo3", "olmo3"),
    ("deepseek_r1", "olmo3"),
]

TOKENS = {"special": ["<|im_start|>", "<|im_end|>", "<|endoftext|>"],
          "added": ["<function_calls>", "</function_calls>"]}  # fmt: skip
TOOLS = py.TOOLS
PROMPTS = ["<|im_start|>user\nweather?<|im_end|>\n<|im_start|>assistant\n",
           "<|im_start|>user\nweather?<|im_end|>\n<|im_start|>assistant\n<think>", ""]  # fmt: skip
CALL = '<function_calls>get_weather(city="Paris", days=3)</function_calls>'
BENCH = ("olmo3", "olmo3", CALL)
BENCH_OUTPUT = ("<think>", REASONING, "</think>", "\n\n", CONTENT, "\n\n", CALL)  # bench/stream.py


def calls(rng: random.Random) -> str:
    sep = rng.choice(["\n", "\n", "\n\n", "\n  ", ", ", "\n\t"])
    return sep.join(py.call(rng) for _ in range(rng.randint(1, 3)))


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = []
    if rng.random() < 0.3:
        pieces += [rng.choice(["<think>", ""]), words(rng, py.WORDS, 0, 3), rng.choice(["</think>", "</think>\n\n"])]
    r = rng.random()
    if r < 0.45:
        pieces += [rng.choice(["", "", "Sure.\n", " "]), "<function_calls>", rng.choice(["", "\n"]) + calls(rng),
                   rng.choice(["</function_calls>", "\n</function_calls>", "", "</function_calls>\nDone."])]
    elif r < 0.75:
        pieces.append(rng.choice(["", " ", "\n"]) + calls(rng))
    else:
        pieces.append(words(rng, py.WORDS))
    if rng.random() < 0.2:
        pieces.append(rng.choice([" tail", "\n", "<|im_end|>", "<function_calls>", "</function_calls>", ")", "\n#"]))
    return truncate(rng, pieces) if rng.random() < 0.15 else pieces


HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], [CALL], ['get_weather(city="Paris")\nsearch(query="q", k=5)'],
    ['<function_calls>\nsearch(query=null, k=true)\nnoargs()\n</function_calls>'],
    ['Let me look.\n<function_calls>search(query="q")</function_calls>'], ['search(query="q") and text'],
    ['<function_calls>search("q")</function_calls>'], ["<function_calls>search(query='q'"],
    ['x <function_calls>noargs()</function_calls> y'], ['get_weather(city="a\nb")'],
    ["<function_calls></function_calls>"], ['[search(query="q")]'], ['api.search(query="q")'],
    ['<function_calls>search(query="q")</function_calls><function_calls>bad(</function_calls>'],
    ['search(query=false, k=-2)'], ["<|im_end|>"],
]
