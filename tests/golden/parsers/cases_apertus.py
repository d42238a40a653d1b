"""Apertus tool calls (``apertus``, ``apertus.py``): ``<|tools_prefix|>[{"name": {args}}]<|tools_suffix|>``,
text before, inside after the JSON and after the block, truncated JSON
(completed as partial JSON), values that are not lists, empty objects."""

from __future__ import annotations

import json
import random
from typing import Any

import cases_qwen3 as qwen3
from family_cases import Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    (None, "apertus"),
    ("deepseek_r1", "apertus"),
]

TOKENS = {"special": ["<|tools_prefix|>", "<|tools_suffix|>", "<|im_start|>", "<|im_end|>"], "added": []}
TOOLS = qwen3.TOOLS
PROMPTS = ["<|im_start|>user\nweather?<|im_end|>\n<|im_start|>assistant\n", ""]
PREFIX, SUFFIX = "<|tools_prefix|>", "<|tools_suffix|>"
CALL = f'{PREFIX}[{{"get_weather": {{"city": "Paris"}}}}]{SUFFIX}'
BENCH = (None, "apertus", CALL)


def value(rng: random.Random) -> Any:
    r = rng.random()
    if r < 0.7:
        return [{rng.choice(qwen3.NAMES[:5]): qwen3.json_value(rng)} for _ in range(rng.randint(1, 3))]
    if r < 0.85:
        return {rng.choice(qwen3.NAMES[:5]): {"city": "Paris"}}
    return rng.choice([[], {}, [{}], 0, "", "s", [1, {"a": 1, "b": 2}], None, [[{"a": 1}]]])


def body(rng: random.Random) -> str:
    r = rng.random()
    # Not ensure_ascii: a cut inside a "\ud83d\ude00" escape completes to a lone surrogate, which no
    # answer can encode (the output is cut anywhere too, below).
    text = json.dumps(value(rng), ensure_ascii=False, indent=rng.choice([None, None, 2]))
    if r < 0.25:
        text = text[: rng.randint(0, len(text))]  # truncated: partial JSON
    elif r < 0.35:
        text = rng.choice(["{bad", "[{,}]", "[1 2]", "nul", "-", "[{\"a\": 1}] trailing", "\"abc\\u00"])
    return rng.choice(["", "", " ", "\n"]) + text


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = []
    if rng.random() < 0.15:
        pieces += ["<think>", words(rng, qwen3.WORDS, 0, 3), "</think>"]
    pieces.append(rng.choice(["", "", " ", "\n", "Sure. ", "Let me see.\n", words(rng, qwen3.WORDS)]))
    if rng.random() < 0.8:
        pieces += [PREFIX, body(rng), rng.choice([SUFFIX, SUFFIX, "", "\n" + SUFFIX, " junk" + SUFFIX])]
    pieces.append(rng.choice(["", "", " tail", "\nDone.", "\n", PREFIX, SUFFIX, "<|im_end|>", SUFFIX + " more"]))
    return truncate(rng, pieces) if rng.random() < 0.15 else pieces


HANDWRITTEN: list[list[Piece]] = [
    ["plain answer"], [CALL], ["Let me see. ", CALL], ["  \n", CALL, "\nDone."],
    [f'{PREFIX}[{{"get_weather": {{"city": "Paris"}}}}, {{"search": {{"query": "q"}}}}]{SUFFIX}'],
    [f'{PREFIX}[{{"get_weather": {{"city": "Par'], [f'{PREFIX}[{{"get_weather": {{"city": "Paris"}}}}] oops{SUFFIX}'],
    [f'{PREFIX}{{"search": {{"query": "q"}}}}{SUFFIX}'], [f"{PREFIX}[]{SUFFIX}"], [f"{PREFIX}{SUFFIX}"],
    [f"{PREFIX}[{{}}]{SUFFIX} after"], [f"{PREFIX}{{bad{SUFFIX}"], [f'{PREFIX}[{{"a": 1, "b": 2}}]{SUFFIX}'],
    [f'{PREFIX}[{{"noargs": null}}]{SUFFIX}'], [f"{PREFIX}\n"], [f"x{SUFFIX}y"],
    [f'{PREFIX}[{{"search": {{"query": "q"}}}}]{SUFFIX}{PREFIX}[{{"noargs": {{}}}}]{SUFFIX}'],
]
