"""PLaMo 3 outputs: multi-token ``<|plamo:...:plamo|>`` markers (think, tool
requests, request, name, arguments), ``<|plamo:tag|>`` ends, missing and
stray markers, arguments after a request's end, truncations (often inside a
marker)."""

from __future__ import annotations

import json
import random

import cases_qwen3 as qwen3
from family_cases import Piece, truncate, words

PAIRS: list[tuple[str | None, str | None]] = [
    ("plamo3", "plamo3"),
    ("plamo3", None),
    (None, "plamo3"),
    ("deepseek_r1", "plamo3"),  # a legacy composition
]

B, E, S = "<|plamo:begin_", "<|plamo:end_", ":plamo|>"
THINK, END_THINK = f"{B}think{S}", f"{E}think{S}"
REQS, END_REQS = f"{B}tool_requests{S}", f"{E}tool_requests{S}"
REQ, END_REQ = f"{B}tool_request{S}", f"{E}tool_request{S}"
NAME, END_NAME = f"{B}tool_name{S}", f"{E}tool_name{S}"
ARGS, END_ARGS = f"{B}tool_arguments{S}<|plamo:constrain|>json<|plamo:msg|>", f"{E}tool_arguments{S}"
EOT = "<|plamo:tag|>"
# The marker pieces are single tokens; the three vLLM keeps (preserve_tokens) and EOT are special.
TOKENS = {"special": [B, E, S, EOT], "added": ["<|plamo:constrain|>", "<|plamo:msg|>"]}
TOOLS = qwen3.TOOLS
PROMPTS = ["<|plamo:op|>user\nweather?<|plamo:op|>assistant\n", f"weather?{THINK}", ""]
REQUESTS = [{"tools": qwen3.TOOLS, "chat_template_kwargs": {"enable_thinking": None}}]


def request(name: str, args: str) -> str:
    return f"{REQ}{NAME}{name}{END_NAME}{ARGS}{args}{END_ARGS}{END_REQ}"


CALL = REQS + request("get_weather", '{"city": "Paris"}') + END_REQS
BENCH = ("plamo3", "plamo3", REQS + request("search", '{"query": "derender streaming", "k": 5}') + END_REQS)


def args(rng: random.Random) -> str:
    if rng.random() < 0.75:
        return json.dumps(qwen3.json_value(rng), ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, None, 1]))
    return rng.choice(["{bad", "", " ", '{"name": "search", "arguments": {"q": 1}}', "[1]", '{"a": "<|plamo:x"}',
                       '{"q": 1} trailing', "\n{}\n"])  # fmt: skip


def rand_request(rng: random.Random) -> list[Piece]:
    name = rng.choice([*qwen3.NAMES[:5], "", " search ", "unknown"])
    parts: list[Piece] = [
        rng.choice([REQ] * 5 + [""]),
        rng.choice([NAME] * 9 + [""]) + name + rng.choice([END_NAME] * 9 + [""]),
        rng.choice([ARGS] * 9 + [""]), args(rng), rng.choice([END_ARGS] * 9 + [""]),
        rng.choice([END_REQ] * 9 + [""]),
    ]
    if rng.random() < 0.08:
        parts += [ARGS, args(rng), END_ARGS]  # arguments again after the request's end
    return parts


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = []
    r = rng.random()
    if r < 0.7:
        pieces += [rng.choice(["", "", THINK]), words(rng, [*qwen3.WORDS, "plan"], 0, 5),
                   rng.choice([END_THINK, END_THINK, END_THINK + "\n", ""])]  # fmt: skip
    pieces.append(rng.choice(["", "Sure.", "  ", "\n", "中文", words(rng, qwen3.WORDS)]))
    if rng.random() < 0.65:
        pieces.append(rng.choice([REQS] * 6 + [""]))
        for _ in range(rng.randint(0, 3)):
            pieces += rand_request(rng)
        pieces.append(rng.choice([END_REQS] * 5 + [""]))
    if rng.random() < 0.2:
        pieces.append(rng.choice([THINK, END_THINK, REQS, END_REQS, REQ, NAME, END_NAME, ARGS, END_ARGS, B, E, S,
                                  ["spell", THINK], ["spell", REQS], " tail"]))  # fmt: skip
    pieces.append(rng.choice(["", "", EOT, " tail", words(rng, qwen3.WORDS)]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


HANDWRITTEN: list[list[Piece]] = [
    ["plain answer"], [""],
    # vLLM's tests (tests/tool_parsers/test_plamo3*, tests/parser/test_plamo3*)
    ["前置き。", CALL, EOT],
    ["ヘッダ本文。", REQS, request("echo", '{"text": "hello"}'), request("sum", '{"a": 1, "b": 2}'), END_REQS, EOT],
    ["説明。", REQS, request("noop", "{}"), END_REQS],
    ["前文。", REQS, REQ, NAME, "broken", END_NAME, ARGS, '{"a": 1}'],
    [THINK, "考え中...", END_THINK, "\n天気を確認します。", CALL],
    ["前置きテキスト。", REQS, request("ping", '{"x": 1}')],
    ["こんにちは", EOT], ["let me think", END_THINK, "Here is the answer.", EOT],
    ['```json\n{"name": "Alice", "age": 30}\n```', CALL, EOT],
    ["plan", END_THINK, REQS, request("get_weather", '{"city": "Rome"}'), ARGS, '{"days": 2}', END_ARGS, END_REQS],
    ["plan", END_THINK, "x", REQS, REQ, NAME, "search", END_NAME, ARGS, '{"query": "q"}<|plamo:end_tool_argu'],
    ["plan", END_THINK, "answer <|plamo:begin_"], ["plan <|plamo:end_thi"], ["plan <|plamo:end_think"],
    ["plan", END_THINK, REQS, REQ, NAME, "get_weather<|plamo:end_"],
    ["plan", END_THINK, "  ", CALL, "  after"], ["plan", REQS, request("search", '{"query": "q"}')],
    # an unfinished marker piece inside a field, cut from the whole field
    ["plan", B, END_THINK, "answer"], ["plan", END_THINK, "x", B, CALL], ["plan", END_THINK, "x", B, REQS, "bad"],
    ["plan", END_THINK, "x", B, REQS, REQ, NAME, "f", END_NAME, END_REQS, " after"],
    ["plan", END_THINK, "x", E, EOT], ["plan", END_THINK, "x ", B + "thi", EOT, "nk"],
]
