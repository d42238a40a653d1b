"""Seed-OSS outputs: Qwen3's shapes (cases_qwen3.py) with the seed: wrapper
tokens, plus the JSON a forced tool_choice reads (Seed-OSS keeps vLLM's
supports_required_and_named: a list of {name, parameters} or one tool's
arguments)."""

from __future__ import annotations

import json
import random

import cases_qwen3 as q
from family_cases import Piece, truncate

__all__ = ["BENCH", "HANDWRITTEN", "PAIRS", "PROMPTS", "TOKENS", "TOOLS", "output"]

TOOLS = q.TOOLS

PAIRS: list[tuple[str | None, str | None]] = [
    ("seed_oss", "seed_oss"),
    ("seed_oss", None),
    (None, "seed_oss"),
    ("deepseek_r1", "seed_oss"),
]

TOKENS = {"special": ["<seed:bos>", "<seed:eos>", "<seed:pad>", "<seed:cot_budget_reflect>",
                      "</seed:cot_budget_reflect>"],
          "added": ["<seed:think>", "</seed:think>", "<seed:tool_call>", "</seed:tool_call>"]}  # fmt: skip

BENCH = ("seed_oss", "seed_oss", "<seed:tool_call>\n<function=search>\n<parameter=query>\nderender streaming\n"
         "</parameter>\n<parameter=k>\n5\n</parameter>\n</function>\n</seed:tool_call>")

HEAD = "<seed:bos>system\nYou can call tools.<seed:eos><seed:bos>user\nweather?<seed:eos><seed:bos>assistant\n"
PROMPTS = [HEAD, HEAD + "<seed:think>", HEAD + "<seed:think></seed:think>\n", ""]

_SEED = {"<think>": "<seed:think>", "</think>": "</seed:think>", "<tool_call>": "<seed:tool_call>",
         "</tool_call>": "</seed:tool_call>", "<|im_end|>": "<seed:eos>", "<|endoftext|>": "<seed:pad>"}  # fmt: skip


def seed(piece: Piece) -> Piece:
    if isinstance(piece, list):
        return [piece[0], str(seed(piece[1]))]
    for old, new in _SEED.items():
        piece = piece.replace(old, new)
    return piece


def forced_json(rng: random.Random) -> str:
    """What guided decoding gives for a forced tool_choice, and near misses."""
    r = rng.random()
    if r < 0.5:
        calls = [{"name": rng.choice(q.NAMES[:5]), "parameters": q.json_value(rng)}
                 for _ in range(rng.randint(0, 2))]  # fmt: skip
        if rng.random() < 0.2:
            calls.append(rng.choice([{"name": 1}, {"parameters": {}}, {"name": "x", "parameters": [1]},
                                     {"name": "x", "strict": "yes", "extra": 1}, {"name": "x", "parameters": None}]))
        return json.dumps(calls, ensure_ascii=rng.random() < 0.5)
    if r < 0.85:
        return json.dumps({"city": rng.choice(q.VALUES), "days": rng.randint(0, 9)}, ensure_ascii=False)
    return rng.choice(["", "  ", "{bad", "[", "null", '[{"name": "search"}] x', "[]"])


def output(rng: random.Random) -> list[Piece]:
    if rng.random() < 0.3:
        head: list[Piece] = rng.choice([[], ["r</think>"], ["<think>r</think>\n"]])
        pieces = [*head, forced_json(rng)]
    else:
        pieces = q.output(rng)
        if rng.random() < 0.1:
            pieces.insert(1, "<seed:cot_budget_reflect>used 10 tokens</seed:cot_budget_reflect>")
    pieces = [seed(p) for p in pieces]
    return truncate(rng, pieces) if rng.random() < 0.1 else pieces


_LIST = '[{"name": "get_weather", "parameters": {"city": "Paris", "days": "5"}}, {"name": "search", "parameters": {}}]'
_ARGS = '{"city": "Paris", "days": 5}'
# After Qwen3's 30 cases the request variants cycle again (family_cases.request_variants):
# index 40 is "required", 41 a named tool, so the forced-JSON shapes land on them.
HANDWRITTEN: list[list[Piece]] = [
    *([seed(p) for p in case] for case in q.HANDWRITTEN),
    ["r</seed:think>  \n "], ["r</seed:think>", "plain words"], ["r</seed:think>" + _LIST],
    ["<seed:think>r</seed:think>"],
    ["r</seed:think>\n" + _ARGS], [_LIST], [_ARGS], ["  "], ["r</seed:think>" + _LIST], ["r</seed:think>" + _ARGS],
    ["r</seed:think>" + _LIST], ["r</seed:think>\n" + _ARGS],
    ['[{"name": 1}]'], ["r</seed:think>  "], ["r</seed:think>", "{bad"], ["<seed:think>r</seed:think>\n\n" + _ARGS],
    ['[{"name": "x", "strict": "yes", "more": 1, "parameters": null}]'], ["<seed:think>r"],
]
