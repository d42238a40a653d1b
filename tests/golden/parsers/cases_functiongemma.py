"""FunctionGemma outputs: content, then <start_function_call>call:name{key:<escape>v<escape>,...}
<end_function_call> calls (nested objects, arrays, bare values), and their
malformed shapes (no end marker, a lazy body across calls, unfinished values)."""

from __future__ import annotations

import random

from cases_gemma4 import args as gemma4_args
from cases_qwen3 import TOOLS, WORDS
from family_cases import Piece, truncate, words

__all__ = ["BENCH", "HANDWRITTEN", "PAIRS", "PROMPTS", "TOKENS", "TOOLS", "output"]

PAIRS: list[tuple[str | None, str | None]] = [
    (None, "functiongemma"),
    ("deepseek_r1", "functiongemma"),
]

# Gemma 3's turn markers are special; FunctionGemma's call markers are added
# here as ordinary tokens (vLLM's parser keeps special tokens only for a
# request with tools, so a special spelling would only test that switch).
TOKENS = {
    "special": ["<start_of_turn>", "<end_of_turn>"],
    "added": ["<start_function_call>", "<end_function_call>", "<escape>", "<start_function_response>",
              "<end_function_response>"],
}  # fmt: skip

E = "<escape>"
BENCH = (None, "functiongemma", f"<start_function_call>call:search{{query:{E}derender streaming{E},k:5}}"
         "<end_function_call>")

TURN = "<start_of_turn>user\nweather?<end_of_turn>\n<start_of_turn>model\n"
PROMPTS = [TURN, "<start_of_turn>developer\nYou can call tools.<end_of_turn>\n" + TURN, TURN + "<think>\n", ""]

NAMES = ["get_weather", "search", "noargs", "set_config", "unknown_tool", "", "get weather", "a.b", "名字", "x1"]
KEYS = ["city", "days", "unit", "detail", "ratio", "tags", "opts", "query", "k", "port", "count", "value",
        "enabled", "x", "", " city "]  # fmt: skip
BARE = ["5", " 7 ", "-1e3", "1.5", "true", "false", "null", "None", "c", "1e400", "NaN", "a b", '"q"', ""]
STRINGS = ["Paris", "杭州", "a\nb", "", "42", "true", '"quoted"', '{"a": 1}', "[1, 2]", "😀", "{bad", "a,b", "}",
           "<end_function_call>"]  # fmt: skip


def args(rng: random.Random) -> str:
    return gemma4_args(rng, 0, (E, STRINGS, BARE, KEYS))


def call(rng: random.Random) -> str:
    head = rng.choice(["<start_function_call>call:"] * 4 + ["<start_function_call>", "<start_function_call> call:"])
    close = rng.choice(["}", "}", "}", ""])
    tail = rng.choice(["<end_function_call>", "<end_function_call>", "<end_function_call>", "\n", ""])
    return f"{head}{rng.choice(NAMES)}{{{args(rng)}{close}{tail}"


def output(rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = []
    if rng.random() < 0.15:
        pieces += ["<think>", words(rng, WORDS, 0, 3), rng.choice(["</think>", "</think>\n", ""])]
    pieces.append(rng.choice(["", "\n", "Sure. ", "  \n", "中文 ", words(rng, WORDS), "I will check. \n"]))
    for _ in range(rng.randint(0, 3)):
        pieces.append(call(rng))
        pieces.append(rng.choice(["", "\n", " ", "between "]))
    if rng.random() < 0.2:
        pieces.append(rng.choice(["<start_function_call>", "<end_function_call>", E, "call:", "<end_of_turn>",
                                  ["spell", "<start_function_call>"]]))
    pieces.append(rng.choice(["", " tail", "\n", words(rng, WORDS)]))
    return truncate(rng, pieces) if rng.random() < 0.2 else pieces


def _call(name: str, body: str = "") -> str:
    return f"<start_function_call>call:{name}{{{body}}}<end_function_call>"


# vLLM's tests/tool_parsers/test_functiongemma_tool_parser.py and more.
HANDWRITTEN: list[list[Piece]] = [
    [""], ["Hello, how can I help you today?"],
    [_call("get_weather", f"location:{E}London{E}")],
    [_call("get_weather", f"location:{E}San Francisco{E},unit:{E}celsius{E}")],
    ["Let me check the weather for you. ", _call("get_weather", f"location:{E}Paris{E}")],
    [_call("get_weather", f"location:{E}London{E}"), _call("get_time", f"timezone:{E}UTC{E}")],
    [_call("set_config", f"count:{E}42{E},enabled:{E}true{E},port:8080,value:null")],
    [_call("get_weather", f"opts:{{n:4,deep:{{x:[1,{E}a{E}]}}}},tags:[{E}a{E},{E}b{E}]")],
    ["  \n", _call("search", f"query:{E}q{E}"), " after"],
    ["<start_function_call>call:search{query:", E, "open"],  # no end marker: the rest is the body
    ["<start_function_call>call:search{query:", E, "a", E, "<start_function_call>call:noargs{}<end_function_call>"],
    ["<start_function_call>call:get weather{}<end_function_call>"],  # not a \w name: no call
    ["<start_function_call>get_weather{}<end_function_call>"],
    ["text <end_function_call> only"],
    [_call("noargs")], [_call("search", "query:,k:5")], [_call("search", "k:5,query")],
    ["a", ["spell", "<start_function_call>"], "call:search{}<end_function_call>"],
    ["<think>r</think>", _call("search", f"query:{E}in content{E}")],
]
