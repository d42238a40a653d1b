"""Cohere Command 3 / 4 outputs as ``cohere_melody``'s filter reads them:
``<|START_THINKING|>..<|END_THINKING|>``, ``<|START_RESPONSE|>`` (Command 3) or
``<|START_TEXT|>`` (Command 4) answers with ``<co>..</co: 0:[1]>`` citations,
``<|START_ACTION|>`` JSON lists of ``{"tool_call_id", "tool_name",
"parameters"}`` closed by ``<|END_ACTION|>``; near misses (an unclosed block,
an action without an id, a value ending in a backslash, markers spelled in
ordinary tokens, blocks in any order)."""

from __future__ import annotations

import json
import random

import cases_qwen3 as q
from family_cases import CONTENT, REASONING, Piece, truncate, words

__all__ = ["BENCH", "BENCH_OUTPUT", "HANDWRITTEN", "PAIRS", "PROMPTS", "TOKENS", "TOOLS", "output"]

TOOLS = q.TOOLS

PAIRS: list[tuple[str | None, str | None]] = [
    ("cohere_command3", "cohere_command3"),
    ("cohere_command3", None),
    (None, "cohere_command3"),
    ("cohere_command4", "cohere_command4"),
    ("cohere_command4", None),
    (None, "cohere_command4"),
    ("cohere_command3", "cohere_command4"),
]

MARKERS = ["<|START_THINKING|>", "<|END_THINKING|>", "<|START_RESPONSE|>", "<|END_RESPONSE|>",
           "<|START_TEXT|>", "<|END_TEXT|>", "<|START_ACTION|>", "<|END_ACTION|>"]  # fmt: skip
TOKENS = {
    "special": ["<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|CHATBOT_TOKEN|>", "<|USER_TOKEN|>",
                "<|SYSTEM_TOKEN|>"],
    "added": MARKERS,
}  # fmt: skip

BENCH = ("cohere_command3", "cohere_command3",
         '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "search", "parameters": {"query": "derender"}}\n]'
         "<|END_ACTION|>")  # fmt: skip
# bench/stream.py: Command's own turn, its answer streamed early up to a "<" (then held to its end)
BENCH_OUTPUT = ("<|START_THINKING|>", REASONING, "<|END_THINKING|><|START_RESPONSE|>", CONTENT, "<|END_RESPONSE|>",
                BENCH[2])

HEAD = "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>weather?<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"
PROMPTS = [HEAD, HEAD + "<|START_THINKING|>", HEAD + "<|START_THINKING|><|END_THINKING|>", ""]

CITE_WORDS = [*q.WORDS, "<co>", "</co: 0:[1]>", "</co: 1:[0,2]>", "</co: 0:[1],1:[2]>", "<co", "</co: x>", "<c",
              "\\", " ", "\n"]  # fmt: skip


def params(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.75:
        value = rng.choice([{}, {"city": "Paris", "days": 5}, {"query": q.json_value(rng)}, q.json_value(rng)])
        text = json.dumps(value, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 4, 8]))
        return text.replace("\n", "\n" + " " * rng.choice([0, 4, 8])) if rng.random() < 0.3 else text
    return rng.choice(["12", '"raw"', "null", "[1, 2]", "{bad", '{"a": "x\\"}', '{"q": "a\\\\"}', "{"])


def action(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.8:
        calls = []
        for i in range(rng.randint(1, 3)):
            name = rng.choice(q.NAMES)
            fields = [f'"tool_call_id": "{i}"', f'"tool_name": {json.dumps(name)}', f'"parameters": {params(rng)}']
            if rng.random() < 0.1:
                fields = fields[1:] if rng.random() < 0.5 else [fields[1], fields[0], fields[2]]
            if rng.random() < 0.1:
                fields[0] = fields[0].replace('"tool_call_id"', '"tool_call"')
            sep = rng.choice([", ", ",\n        ", ","])
            calls.append("{" + rng.choice(["", "\n        "]) + sep.join(fields) + rng.choice(["", "\n    "]) + "}")
        body = "[" + rng.choice(["\n    ", ""]) + ",\n    ".join(calls) + rng.choice(["\n]", "]"])
    else:
        body = rng.choice(["[]", "", "[bad", '{"tool_name": "search", "parameters": {}}', "x\\",
                           '[{"tool_call_id": "0", "tool_name": "search"}]',
                           '[{"tool_name": "a\\"b", "parameters": 1}]'])
    return "<|START_ACTION|>" + rng.choice(["", "\n", " "]) + body + rng.choice(["<|END_ACTION|>", "<|END_ACTION|>",
                                                                                 "\n<|END_ACTION|>", ""])


def text_block(rng: random.Random) -> str:
    return words(rng, CITE_WORDS, 0, 6)


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = []
    answer = rng.choice(["<|START_RESPONSE|>", "<|START_TEXT|>"])
    end = {"<|START_RESPONSE|>": "<|END_RESPONSE|>", "<|START_TEXT|>": "<|END_TEXT|>"}[answer]
    if rng.random() < 0.15:
        pieces.append(text_block(rng))
    if rng.random() < 0.7:
        pieces += [rng.choice(["<|START_THINKING|>", "<|START_THINKING|>", ""]), text_block(rng),
                   rng.choice(["<|END_THINKING|>", "<|END_THINKING|>", ["spell", "<|END_THINKING|>"], ""])]
    for _ in range(rng.randint(0, 2)):
        r = rng.random()
        if r < 0.45:
            pieces.append(action(rng))
        elif r < 0.9:
            pieces += [rng.choice([answer, answer, ""]), text_block(rng), rng.choice([end, end, "", "\n"])]
        else:
            pieces.append(rng.choice([*MARKERS, "<|END_OF_TURN_TOKEN|>", ["spell", "<|START_ACTION|>"], " "]))
        pieces.append(rng.choice(["", "", "\n", " "]))
    if rng.random() < 0.1:
        pieces.append(rng.choice(["<|END_OF_TURN_TOKEN|>", " tail", "\\"]))
    return truncate(rng, pieces) if rng.random() < 0.15 else pieces


_CALL = ('<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", "parameters": '
         '{"city": "Paris", "days": 5}}\n]<|END_ACTION|>')  # fmt: skip
HANDWRITTEN: list[list[Piece]] = [
    [""], ["plain answer"], ["<|START_THINKING|>plan<|END_THINKING|><|START_RESPONSE|>Hello<|END_RESPONSE|>"],
    ["<|START_THINKING|>plan<|END_THINKING|><|START_TEXT|>Hello<|END_TEXT|>"],
    ["implicit plan<|END_THINKING|><|START_TEXT|>Hello<|END_TEXT|>"],
    ["<|START_THINKING|>  plan  <|END_THINKING|>\n\n<|START_RESPONSE|>  Hello  <|END_RESPONSE|>"],
    ["<|START_THINKING|>I will check.<|END_THINKING|>", _CALL], [_CALL], ["Let me look. ", _CALL],
    ["<|START_RESPONSE|>The sky is <co>blue</co: 0:[1]> today.<|END_RESPONSE|>"],
    ["<|START_RESPONSE|>See <co>a</co: 0:[1]> and <co>b</co: 1:[0,2]>.<|END_RESPONSE|>"],
    ["<|START_RESPONSE|>Half <co>open citation"], ["<|START_RESPONSE|>x <co>y</co: 0:[1]"],
    ["<|START_THINKING|>a<|END_THINKING|><|START_THINKING|>b<|END_THINKING|>c"],
    ["<|START_RESPONSE|>a<|END_RESPONSE|> after end"], ["<|START_THINKING|>unclosed"],
    ['<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "search", "parameters": {"query": "a"}}, '
     '{"tool_call_id": "1", "tool_name": "get_weather", "parameters": {"city": "Rome"}}]<|END_ACTION|>'],
    ['<|START_ACTION|>[{"tool_name": "search", "parameters": {"query": "a"}}]<|END_ACTION|>'],
    ['<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "search", "parameters": {"query": "a\\\\'],
    ['<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "search", "parameters": {"q": "unclosed'],
    ["<|START_THINKING|>x<|END_THINKING|>", _CALL, "<|START_RESPONSE|>done<|END_RESPONSE|>"],
    # melody's own tests (src/parsing/filter.rs, src/python_ffi.rs)
    ['<|START_THINKING|>thinking<|END_THINKING|><|START_ACTION|>[{"tool_call_id": "0", "tool_name": "search", '
     '"parameters": {"q": "hello"}}]<|END_ACTION|>'],
    ["<|START_THINKING|><|END_THINKING|><|START_RESPONSE|><|END_RESPONSE|>"],
    ["<|START_RESPONSE|>héllo wörld 日本<|END_RESPONSE|>"], ["<|START_RESPONSE|>a <|START_ like text<|END_RESPONSE|>"],
]
