"""Legacy JSON tool calls decided at the end (``held_tools.py``): ``granite4``
(``<tool_call>{json}</tool_call>`` blocks), ``internlm``
(``<|action_start|><|plugin|>{json}<|action_end|>``), ``jamba``
(``<tool_calls>[...]</tool_calls>``) and ``xlam`` (a JSON list, bare, in a
code block, ``[TOOL_CALLS]``, ``<tool_call>`` or after ``</think>``).  Every
output is read by every parser, so each sees the others' markup as text."""

from __future__ import annotations

import json
import random
from typing import Any

import cases_qwen3 as qwen3
from family_cases import Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    (None, "granite4"),
    (None, "internlm"),
    (None, "jamba"),
    (None, "xlam"),
    ("deepseek_r1", "granite4"),
]

# InternLM2's action tokens are special there; Granite 4's and Jamba's markers are added tokens.
TOKENS = {"special": ["<|action_start|>", "<|action_end|>", "<|plugin|>", "<|im_start|>", "<|im_end|>"],
          "added": ["<tool_call>", "</tool_call>", "<tool_calls>", "</tool_calls>"]}  # fmt: skip
TOOLS = qwen3.TOOLS
PROMPTS = ["<|im_start|>user\nweather?<|im_end|>\n<|im_start|>assistant\n", ""]
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
BENCH = (None, "granite4", CALL)


def obj(rng: random.Random, args_key: str = "arguments") -> Any:
    r = rng.random()
    args: Any = qwen3.json_value(rng)
    if r < 0.65:
        return {"name": rng.choice(qwen3.NAMES[:5]), args_key: args if isinstance(args, dict) else {}}
    if r < 0.8:
        return {"name": "search", rng.choice(["arguments", "parameters"]): args}
    return rng.choice([{"name": "a"}, {"arguments": {}}, [1], "s", {"name": 1, "arguments": {}}, {},
                       {"name": "a", "arguments": "{}"}, {"name": "a", "arguments": None}])


def dump(rng: random.Random, value: Any) -> str:
    if rng.random() < 0.1:
        return rng.choice(["{bad", "", " ", '{"name": "a", "arguments": {}} x', "[", "5",
                           '{"name": "a", "arguments": {"k": "v\n"}}'])
    return json.dumps(value, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, None, 2]))


def granite4_calls(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = []
    for _ in range(rng.randint(1, 3)):
        pieces.append("<tool_call>" + rng.choice(["", "\n", " "]) + dump(rng, obj(rng))
                      + rng.choice(["</tool_call>", "\n</tool_call>", "</tool_call>", ""]))
        pieces.append(rng.choice(["", "\n", " then ", "\n\n"]))
    return pieces


def internlm_call(rng: random.Random) -> list[Piece]:
    return [rng.choice(["<|action_start|><|plugin|>", "<|action_start|><|plugin|>\n", "<|action_start|>"]),
            rng.choice(["", "", "call: "]) + dump(rng, obj(rng, rng.choice(["parameters", "arguments"]))),
            rng.choice(["<|action_end|>", "<|action_end|>\n", "", "<|action_end|><|im_end|>"])]  # fmt: skip


def array(rng: random.Random) -> str:
    if rng.random() < 0.15:
        return dump(rng, rng.choice([[], {}, "", {"name": "a", "arguments": {}}, [[1]]]))
    return dump(rng, [obj(rng) for _ in range(rng.randint(1, 3))])


def jamba_call(rng: random.Random) -> list[Piece]:
    return ["<tool_calls>", rng.choice(["", "\n"]) + array(rng), rng.choice(["</tool_calls>", "\n</tool_calls>", ""])]


def xlam_call(rng: random.Random) -> list[Piece]:
    body = array(rng)
    return [rng.choice([body, body, f"```json\n{body}\n```", f"```{body}```", f"[TOOL_CALLS]{body}\n",
                        f"<tool_call>{body}</tool_call>", f"<think>plan</think>{body}", f"</think>\n{body}"])]


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = qwen3.reasoning(rng) if rng.random() < 0.2 else []
    pieces.append(rng.choice(["", "", " ", "  \n", "Sure. ", "中文 ", words(rng, qwen3.WORDS)]))
    r = rng.random()
    if r < 0.3:
        pieces += granite4_calls(rng)
    elif r < 0.5:
        pieces += internlm_call(rng)
    elif r < 0.7:
        pieces += jamba_call(rng)
    elif r < 0.9:
        pieces += xlam_call(rng)
    pieces.append(rng.choice(["", "", " tail", "\n", "<tool_call>", "</tool_call>", "<tool_calls>",
                              "<|action_start|><|plugin|>", "<|im_end|>", words(rng, qwen3.WORDS)]))
    return truncate(rng, pieces) if rng.random() < 0.15 else pieces


HANDWRITTEN: list[list[Piece]] = [
    ["plain answer"], [CALL], ["Let me check. ", CALL, " done"], ["  \n", CALL],
    [CALL, "\n", '<tool_call>{"name": "search", "arguments": {"query": "q"}}</tool_call>'],
    ["<tool_call><tool_call>x</tool_call>"], ["a</tool_call>b"], ["<tool_call></tool_call>"],
    ['<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": 1}"}</tool_call>'],
    ['<tool_call>{"name": "get_weather", "arguments": null}</tool_call>'],
    ['<tool_call>{"name": "get_weather", "arguments": {"city": "Par'],
    ['I will search.<|action_start|><|plugin|>{"name": "search", "parameters": {"query": "q"}}<|action_end|>'],
    ['<|action_start|><|plugin|>\n{"name": "get_weather", "arguments": {"city": "Paris"}}<|action_end|>'],
    ['<|action_start|><|plugin|>{"name": "noargs"}<|action_end|>'],
    ['<|action_start|><|plugin|>{"name": "a", "parameters": {}}<|action_end|>x<|action_start|><|plugin|>{}'],
    ['<|action_start|><|plugin|>{bad<|action_end|>'],
    ['<tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_calls>'],
    [' <tool_calls>[{"name": "search", "arguments": {"query": "q"}}, '
     '{"name": "noargs", "arguments": {}}]</tool_calls>'],
    ["Hi <tool_calls>[]</tool_calls>"], ["<tool_calls>{}</tool_calls>"], ['<tool_calls>""</tool_calls>'],
    ['<tool_calls>[{"name": "search"}]</tool_calls>'], ['<tool_calls>[{"name": "search", "arguments": {}}]'],
    ['[{"name": "get_weather", "arguments": {"city": "Paris"}}]'],
    ['```json\n[{"name": "search", "arguments": {"query": "q"}}]\n```'],
    ['Sure.\n```\n[{"name": "search", "arguments": {"query": "q"}}]```\nafter'],
    ['[TOOL_CALLS][{"name": "search", "arguments": {"query": "q"}}]\nmore'],
    ['<think>hmm</think>[{"name": "search", "arguments": {"query": "q"}}]'],
    ['[{"name": "search", "arguments": "raw"}, {"bad": 1}]'], ['[{"name": "search", "arguments": [1]}]'],
    ['[{"name": "search", "arguments": {"query": "q"'], ["[1, 2]"],
]
