"""LFM2 tool calls (``lfm2``, ``lfm2.py``): ``<|tool_call_start|>[f(a=1)]<|tool_call_end|>``
with text before and after, echoed calls, and the texts vLLM repairs before
parsing (raw control characters in strings, ``07``, nested quotes, keyword
argument names), plus what stays content."""

from __future__ import annotations

import random

import cases_pythonic as py
from family_cases import Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    (None, "lfm2"),
    ("deepseek_r1", "lfm2"),
]

TOKENS = {"special": ["<|tool_call_start|>", "<|tool_call_end|>", "<|im_start|>", "<|im_end|>"], "added": []}
TOOLS = py.TOOLS
PROMPTS = ["<|im_start|>user\nweather?<|im_end|>\n<|im_start|>assistant\n", ""]
START, END = "<|tool_call_start|>", "<|tool_call_end|>"
CALL = f'{START}[get_weather(city="Paris")]{END}'
BENCH = (None, "lfm2", CALL)

REPAIRS = ["month=07", "n=007_0", "v=0.07", "v=00", "x='a\nb'", 'x="tab\there"', "from=1", "in_=2", "class=3",
           "command='sed -n '1,9p' f.py'", "q='it's'", "q='a' 'b'", "x='\\\\'", "v=07.5", "v=1e07", "v=0x1F",
           "x='\x00'", "k=True", "k=null", "s='''t'''"]  # fmt: skip


def call(rng: random.Random) -> str:
    if rng.random() < 0.35:
        args = [rng.choice(REPAIRS) for _ in range(rng.randint(1, 2))]
        return f"{rng.choice(py.NAMES)}({', '.join(args)})"
    return py.call(rng)


def block(rng: random.Random) -> list[Piece]:
    body = "[" + rng.choice([", ", ","]).join(call(rng) for _ in range(rng.randint(1, 3))) + "]"
    if rng.random() < 0.1:
        body = rng.choice(["[]", "[1]", "f(a=1)", "[f(a=1)] x", "", " [f(a=1)] "])
    return [START, rng.choice(["", " ", "\n"]) + body, rng.choice([END, END, "\n" + END, ""])]


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = []
    if rng.random() < 0.15:
        pieces += ["<think>", words(rng, py.WORDS, 0, 3), "</think>"]
    pieces.append(rng.choice(["", "", " ", "\n", "Sure. ", "Let me check.\n", words(rng, py.WORDS)]))
    if rng.random() < 0.8:
        pieces += block(rng)
        if rng.random() < 0.15:
            pieces += [rng.choice(["[f(a=1)]", "echo"]), END]  # an echoed call
    pieces.append(rng.choice(["", "", " tail", "\nThe weather is sunny.", "\n", START, END, "<|im_end|>"]))
    return truncate(rng, pieces) if rng.random() < 0.15 else pieces


HANDWRITTEN: list[list[Piece]] = [
    ["plain answer"], [CALL], ["Let me check. ", CALL, " It is sunny."], ["  \n", CALL, "\n"],
    [f'{START}[get_weather(city="Paris"), search(query="q", k=5)]{END}'],
    [f'{START}[get_weather(city="Paris")]{END}[get_weather(city="Paris")]{END}The weather is sunny.'],
    [f'{START}[get_weather(city="Paris")]'], [f"{START}[]{END}"], [f"{START}get_weather(){END}"],
    [f"{START}[search(month=07)]{END}"], [f"{START}[memory_get(from=1, in=2)]{END}"],
    [f"{START}[run(command='sed -n '360,450p' f.py')]{END}"], [f"{START}[run(command='a\nb')]{END}"],
    [f"{START}[f(x='a' + 'b')]{END}"], [f"{START}[f('pos')]{END}"], [f"{START}[f(a=1)] trailing{END}"],
    [f"x{END}y"], [START], [f"{START}[search(query=null, k=true)]{END}"],
]
