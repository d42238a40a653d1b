"""Response-template outputs with XML-inline calls (``hf`` and ``beam``): the
test tokenizer's template reads a call's ``<name>`` and ``<args>`` elements
(``xml-inline`` with ``merge_duplicates``, values through ``json`` with
``allow_non_json``) and thinking that the prompt opens with ``<think>\\n``;
``<|im_end|>`` or ``<|endoftext|>`` closes the content."""

from __future__ import annotations

import json
import random
from typing import Any

import cases_qwen3 as qwen3
from family_cases import Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [("hf", "hf"), (None, "hf"), ("beam", "beam")]

TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": ["<|im_start|>assistant\n"],
    "fields": {
        "thinking": {"open": "<think>\n", "close": ["\n</think>\n\n", "</think>"], "content": "text"},
        "content": {"close": ["<|im_end|>", "<|endoftext|>"], "content": "text"},
        "tool_calls": {
            "open": "<tool_call>", "close": "</tool_call>", "content": "xml-inline", "repeats": True,
            "content_args": {"tag_pattern": r"<(?P<key>\w+)>(?P<value>.*?)</(?P=key)>", "merge_duplicates": True,
                             "value_parser": {"name": "json", "args": {"allow_non_json": True}}},
            "transform": {"type": "function", "function": {"name": "{content.name}", "arguments": "{content.args}"}},
        },
    },
}  # fmt: skip

TOKENS = {"special": ["<|im_start|>", "<|im_end|>", "<|endoftext|>"], "added": ["<tool_call>", "</tool_call>"],
          "config": {"response_template": TEMPLATE}}  # fmt: skip
TOOLS = qwen3.TOOLS
PROMPTS = qwen3.PROMPTS
CALL = '<tool_call><name>get_weather</name><args>{"city": "Paris", "days": "5"}</args></tool_call>'
BENCH = ("hf", "hf", CALL)


def element(rng: random.Random) -> str:
    key = rng.choice(["name", "name", "args", "args", "extra", "name"])
    if key == "name":
        value = rng.choice([*qwen3.NAMES[:5], '"search"', "", " get_weather\n", "1", "null"])
    else:
        value = json.dumps(qwen3.json_value(rng), ensure_ascii=rng.random() < 0.5)
        value = rng.choice([value, value, "{bad", '{"city": "Paris"}', "[]", '"s"'])
    close = rng.choice([f"</{key}>", f"</{key}>", f"</{key}>", "", "</other>"])
    return f"<{key}>{value}{close}" + rng.choice(["", "\n"])


def call(rng: random.Random) -> list[Piece]:
    head: Piece = rng.choice(["<tool_call>", "<tool_call>\n", ["spell", "<tool_call>"]])
    if rng.random() < 0.7:
        elems = [f"<name>{rng.choice(qwen3.NAMES[:5])}</name>",
                 "<args>" + json.dumps(qwen3.json_value(rng) if rng.random() < 0.3 else {
                     rng.choice(qwen3.KEYS): rng.choice(qwen3.VALUES) for _ in range(rng.randint(0, 3))}) + "</args>"]
    else:
        elems = [element(rng) for _ in range(rng.randint(0, 3))]
    tail: Piece = rng.choice(["</tool_call>", "\n</tool_call>", "", "</tool_", ["spell", "</tool_call>"]])
    return [head, *elems, tail]


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = []
    if rng.random() < 0.6:
        pieces += [rng.choice(["", "<think>\n", "<think>"]), words(rng, [*qwen3.WORDS, "plan"], 0, 5),
                   rng.choice(["\n</think>\n\n", "</think>", "\n</think>", "\n</thi", ""])]
    pieces.append(rng.choice(["", "\n\n", "Sure. ", "  \n", words(rng, qwen3.WORDS)]))
    for _ in range(rng.randint(0, 3) if rng.random() < 0.7 else 0):
        pieces.extend(call(rng))
        pieces.append(rng.choice(["", "\n", " "]))
    if rng.random() < 0.3:
        pieces.append(rng.choice(["<tool_call>", "</tool_call>", "</think>", "<think>\n", "<|im_end|>", "<|im_",
                                  "<|endoftext|>", "<name>x</name>"]))  # fmt: skip
    pieces.append(rng.choice(["", " tail", "\n", "<|im_end|>", words(rng, qwen3.WORDS)]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


HANDWRITTEN: list[list[Piece]] = [
    ["plan\n</think>\n\nHi<|im_end|>"], ["<think>\nplan</think>Hi"], [CALL], ["Let me check. ", CALL, "\n", CALL],
    ['<tool_call><name>get_weather</name><name>search</name><args>{}</args></tool_call>'],  # merged: no call
    ['<tool_call><name>"search"</name><args>{"k": "3"}</args></tool_call>'],
    ["<tool_call><name>noargs</name><args>not json</args></tool_call>"],  # arguments kept as text
    ["<tool_call><name>noargs</name></tool_call>"], ["<tool_call><args>{}</args></tool_call>"],
    ["<tool_call><name>get_weather</name>\n<args>\n{\"days\": \"2\"}\n</args>\n</tool_call> after"],
    ["<tool_call><name>get_weather</name><args>{\"city\": \"Par"],
]
