"""Muse outputs: channel messages (``to=self``, ``to=user``, ``to=commentary``,
``to=developer``, tool recipients, bare ``<|message|>``) closed by
``<|eom|>``/``<|eot|>`` or not, with ATEM ``<atem:invoke>`` markup in tool
channels and echoed into reasoning or answers, truncated and malformed."""

from __future__ import annotations

import random
from typing import Any

import cases_qwen3 as qwen3
from family_cases import CONTENT, REASONING, Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    ("muse", "muse"),
    ("muse", None),
    (None, "muse"),
    ("muse_glimmer", "muse_glimmer"),
    ("muse_glimmer", None),
    (None, "muse_glimmer"),
    ("musespark", "musespark"),  # vLLM's alias of muse
    ("deepseek_r1", "muse"),  # a legacy composition
]

START, MSG, EOM, EOT = "<|start|>", "<|message|>", "<|eom|>", "<|eot|>"
# Muse's framing tokens are special (kept: both parsers set skip_special_tokens off).
TOKENS = {"special": [START, MSG, EOM, EOT], "added": []}

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "unit": {"type": ["string", "null"]},
        "tags": {"type": "array"}, "opts": {"anyOf": [{"type": "object"}, {"type": "string"}]}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "k": {"type": "integer"}}, "additionalProperties": {"type": "number"}}}},
    {"type": "function", "function": {"name": "read.read", "parameters": {"type": "object", "properties": {
        "path": {"$ref": "#/$defs/P"}}, "$defs": {"P": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "noargs"}},
]  # fmt: skip

PROMPTS = [f"{START}user{MSG}weather?{EOT}{START}assistant", f"{START}user{MSG}weather?{EOT}", ""]


def param(key: str, value: str) -> str:
    return f'<atem:parameter name="{key}">{value}</atem:parameter>'


def invoke(name: str, *params: str) -> str:
    return f'<atem:invoke name="{name}">\n' + "\n".join(params) + "\n</atem:invoke>"


def calls(*invokes: str) -> str:
    return "<atem:function_calls>\n" + "\n".join(invokes) + "\n</atem:function_calls>"


def header(to: str | None, first: bool = False) -> str:
    return ("" if first else f"{START}assistant") + (f" to={to}" if to else "") + MSG


CALL = header("get_weather") + calls(invoke("get_weather", param("city", "Paris"))) + EOM
BENCH = ("muse", "muse", header("search") + calls(invoke("search", param("query", "derender streaming"),
                                                        param("k", "5"))) + EOM)
BENCH_OUTPUT = (header("self", True), REASONING, EOM, header("commentary"), CONTENT, EOM, BENCH[2])  # bench/stream.py

WORDS = [*qwen3.WORDS, " to", " to=", "to=user", "<", "|", "<|", "message", "\n", " "]
NAMES = ["get_weather", "search", "read.read", "noargs", "get_weather.get_weather", "unknown", "search.search",
         'a"b', ""]  # fmt: skip
KEYS = ["city", "days", "unit", "tags", "opts", "query", "k", "path", "extra", ""]
VALUES = ["Paris", "杭州", "5", " 7 ", "1.5", "true", "null", '["a", "b"]', '{"n": 4}', "a\nb", "", "{bad",
          'quote " and \\ back', "😀", "NaN", "<b>", "-0", '"s"']  # fmt: skip
RECIPIENTS = [None, "self", "self", "user", "user", "commentary", "developer", "get_weather", "search",
              "read.read", "functions.search", "x-y_z"]  # fmt: skip


def rand_invoke(rng: random.Random) -> str:
    name = rng.choice(NAMES)
    params = [f'<atem:parameter name="{rng.choice(KEYS)}">{rng.choice(VALUES)}'
              + rng.choice(["</atem:parameter>"] * 5 + [""]) for _ in range(rng.randint(0, 3))]  # fmt: skip
    opener = rng.choice([f'<atem:invoke name="{name}">', f'<atem:invoke name="{name}">', "<atem:invoke>",
                         f'<atem:invoke id="1" name="{name}">'])  # fmt: skip
    return opener + rng.choice(["\n", ""]) + "\n".join(params) + rng.choice(["\n</atem:invoke>"] * 4 + [""])


def body(rng: random.Random, to: str | None) -> str:
    tool = to not in (None, "self", "user", "commentary", "developer") or rng.random() < 0.15
    if tool and rng.random() < 0.85:
        invokes = "\n".join(rand_invoke(rng) for _ in range(rng.randint(0, 2)))
        return rng.choice(["<atem:function_calls>\n", "<atem:function_calls>", ""]) + invokes + rng.choice(
            ["\n</atem:function_calls>", "</atem:function_calls>", ""])
    return words(rng, WORDS, 0, 5)


def message(rng: random.Random, first: bool) -> list[Piece]:
    to = rng.choice(RECIPIENTS)
    head = header(to, first=first and rng.random() < 0.7)
    if rng.random() < 0.1:
        head = rng.choice([f" to={to}{MSG}", f"{START} assistant to={to}{MSG}", f"{START}assistant\tto={to}{MSG}",
                           f"{START}assistant to={to} {MSG}", f"to={to}", f"{START}assistant"])  # fmt: skip
    end = rng.choice([EOM, EOM, EOT, "", "\n"])
    return [head, body(rng, to), end]


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = []
    if rng.random() < 0.1:
        pieces.append(words(rng, WORDS))  # no framing first
    for i in range(rng.randint(0, 4)):
        pieces += message(rng, first=i == 0)
    if rng.random() < 0.2:
        pieces.append(rng.choice([START, MSG, EOM, EOT, "<atem:invoke", "to=self", CALL, " tail",
                                  ["spell", MSG], ["spell", EOM]]))  # fmt: skip
    return truncate(rng, pieces) if rng.random() < 0.15 else pieces


HANDWRITTEN: list[list[Piece]] = [
    ["plain answer"], [""],
    # vLLM's tests (tests/tool_parsers, tests/reasoning: Muse Glimmer streaming and truncation)
    [" to=self<|message|>I should read the hostname file to answer.<|eom|>", "<|start|>assistant to=read.read",
     MSG, calls(invoke("read.read", param("path", "/etc/hostname")))],
    [" to=self<|message|>Think about it.<|eom|>", "<|start|>assistant to=user<|message|>The answer is 42.<|eot|>"],
    [" to=self<|message|>Maybe I should call ", calls(invoke("read.read", param("path", "/etc/hostname"))),
     " but wait"],
    [header("self", True), "plan", EOM, CALL, header("user"), "Done.", EOT],
    [header("self", True), "plan", EOM, header("commentary"), "Checking.", EOM, CALL],
    [header("get_weather.get_weather", True), calls(invoke("get_weather.get_weather", param("city", "Paris"),
                                                           param("days", "3"))), EOM],
    [header("search", True), calls(invoke("search", param("query", "5"), param("k", "5"), param("extra", "2.5"),
                                          param("other", "x"))), EOM],
    [header("get_weather", True), calls(invoke("get_weather", param("unit", "null"), param("tags", "[1]"),
                                               param("opts", '{"a": 1}'))), EOM],
    [MSG, "bare reasoning", EOM, header("user"), "answer", EOT],
    [header("self", True), "unclosed reasoning", header("search"), calls(invoke("search", param("query", "q")))],
    [header("developer", True), "dropped", EOM, header("user"), "shown", EOT],
    [header("user", True), "echo ", calls(invoke("search", param("query", "q"))), EOT],
    [calls(invoke("search", param("query", "unframed")))],
    [header("self", True), "a", EOM, header("self"), "b", EOM, header("user"), "c"],
    [header("search", True), calls(invoke("search", param("query", "q"))), EOM, header("get_weather"),
     calls(invoke("get_weather", param("city", "Rome"))), EOM],
    [header("search", True), '<atem:function_calls>\n<atem:invoke name="search">\n<atem:parameter name="query">q'],
    [header("self", True), "x", ["spell", EOM], header("user"), "y"],
]
