"""Differential fuzzing of our parsers against the live vLLM 0.33 parsers.

Not part of the test suite (it needs vLLM).  Run with the reference venv::

    VLLM_TARGET_DEVICE=cpu /work/peer/venv/bin/python \
        tools/parsers/fuzz_parsers.py --seed 1 --n 20000 --mode structured

``--mode soup`` glues random marker fragments together; ``--mode
structured`` builds turn-shaped outputs (reasoning, prose, DSML invokes or
Hermes calls with random parameters/JSON).  Every case runs through vLLM
(exactly as ``record_parsers.py`` does) and through ``parse_message``; a
mismatch is printed.  Cases where vLLM itself raises (a non-string name in a
nameless DSML invoke's JSON fails pydantic validation, i.e. HTTP 500) are
counted separately: we return a result there.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

import record_parsers as rp  # noqa: E402  (also stubs vllm.parser.mistral)

D = rp.D
FRAGMENTS = [
    "<think>", "</think>", "<tool_call>", "</tool_call>", f"<{D}tool_calls>",
    f"</{D}tool_calls>", f"<{D}toolcalls>", f"<{D}tool>", f'<{D}invoke name="', '">',
    f"</{D}invoke>", f"<{D}parameter", f"</{D}parameter>", ' name="', ' string="true"',
    ' string="false"', ">", '"', rp.EOS, rp.BOS, "<", "｜", "DSML", " ", "\n", "a",
    "search", "get_weather", "location", "days", "5", "{", "}", "[", "]", ":", ",",
    '"name"', '"arguments"', '{"name": "search", "arguments": {"query": "x"}}',
    '{"query": "q"}', "arguments", "input", "null", "true", "1.5", "😀", "杭州",
    "\x1c", "\u00a0", "\t",
]
BIG = [
    rp.hermes_call(), rp.dsml_block(rp.INV_WEATHER), rp.INV_SEARCH,
    rp.dsml_param("location", "x"), rp.dsml_param("days", "3", "false"),
    rp.dsml_param("arguments", '{"query":"w"}', "false"),
]
VALUES = [
    "5", '"5"', "杭州", '{"n": "4"}', '[1,"2"]', "true", "null", "1e400", "NaN",
    '{"query": "q"}', "{bad", "  7 ", "\n x\n", '"a\\"b"', '{"name": "search"}',
    "-0.0", "12345678901234567890123",
]
NAMES = ["location", "days", "unit", "detail", "ratio", "tags", "opts", "query", "k",
         "arguments", "input", "name", "x"]


def json_value(rng: random.Random, depth: int = 0):
    r = rng.random()
    if depth > 2 or r < 0.4:
        return rng.choice([1, -2.5, "s", "é😀", None, True, 1e20, 'a"b'])
    if r < 0.7:
        return {rng.choice(NAMES): json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    return [json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]


def dsml_param(rng: random.Random) -> str:
    string = rng.choice(["true", "false", None, "TRUE", ""])
    attr = "" if string is None else f' string="{string}"'
    sep = rng.choice([" ", "  ", "\n"])
    close = rng.choice([f"</{D}parameter>"] * 4 + [""])
    return f'<{D}parameter{sep}name="{rng.choice(NAMES)}"{attr}>{rng.choice(VALUES)}{close}'


def dsml_invoke(rng: random.Random) -> str:
    name = rng.choice(["search", "get_weather", "noargs", "", " search ", "  ", "zzz"])
    body = "\n".join(dsml_param(rng) for _ in range(rng.randint(0, 4)))
    if rng.random() < 0.15:
        body = json.dumps({
            "name": rng.choice(["search", "", " x", 5]),
            rng.choice(["arguments", "parameters", "other"]): json_value(rng),
        })
    end = rng.choice([f"\n</{D}invoke>"] * 5 + [f"</{D}tool_calls>", ""])
    return f'<{D}invoke name="{name}">\n{body}{end}'


def hermes_call(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.6:
        body = json.dumps(
            {"name": rng.choice(["search", "get_weather", "x"]), "arguments": json_value(rng)},
            ensure_ascii=rng.random() < 0.5,
        )
    elif r < 0.7:
        body = json.dumps({"name": rng.choice([1, None, "a"]), "arguments": json_value(rng)})
    elif r < 0.8:
        body = json.dumps({"name": "a"})
    else:
        body = rng.choice(["{bad", "", " ", "[1]", '"s"', '{"name":"a","arguments":{}} x'])
    return ("<tool_call>" + rng.choice(["", "\n", " "]) + body
            + rng.choice(["\n</tool_call>", "</tool_call>", "", "</tool_"]))


def structured(rng: random.Random) -> str:
    out = []
    if rng.random() < 0.7:
        out.append(rng.choice(["<think>", "", "x"]) + rng.choice(["plan", "", "  "])
                   + rng.choice(["</think>", "</think>\n\n", ""]))
    out.append(rng.choice(["", "pre ", "  \n", "中文 "]))
    if rng.random() < 0.5:
        start = rng.choice([f"<{D}tool_calls>", f"<{D}toolcalls>", f"<{D}tool>", ""])
        invokes = "\n".join(dsml_invoke(rng) for _ in range(rng.randint(0, 3)))
        out.append(start + "\n" + invokes + rng.choice([f"\n</{D}tool_calls>", ""]))
    else:
        out.append(rng.choice(["", " ", "\n"]).join(
            hermes_call(rng) for _ in range(rng.randint(0, 3))))
    out.append(rng.choice(["", " tail", rp.EOS, "\n"]))
    return "".join(out)


def soup(rng: random.Random) -> str:
    parts = [rng.choice(BIG) if rng.random() < 0.1 else rng.choice(FRAGMENTS)
             for _ in range(rng.randint(0, 25))]
    return ("</think>" if rng.random() < 0.4 else "") + "".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--mode", choices=["soup", "structured"], default="structured")
    ap.add_argument("--model", default="/work/peer/model")
    args = ap.parse_args()

    from vllm.entrypoints.openai.chat_completion.message_assembly import (
        assemble_chat_message_fields,
    )
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.parser import ParserManager
    from vllm.tokenizers import get_tokenizer

    from derender_queue.core.parsers import (
        ParseRequest,
        build_parser_factory,
        parse_message,
    )

    logging.getLogger("vllm").setLevel(logging.CRITICAL)
    tok = get_tokenizer(args.model)
    theirs, ours = {}, {}
    for name, (r, t, auto) in rp.CONFIGS.items():
        theirs[name] = ParserManager.get_parser(
            tool_parser_name=t, reasoning_parser_name=r, enable_auto_tools=auto, tokenizer=tok
        )
        ours[name] = build_parser_factory(
            r, t, vocab=tok.get_vocab(), enable_auto_tools=auto,
            special_tokens=tok.all_special_tokens,
        )

    rng = random.Random(args.seed)
    make = structured if args.mode == "structured" else soup
    bad = crashes = 0
    for _ in range(args.n):
        text = make(rng)
        config = rng.choice(list(rp.CONFIGS))
        variant = rng.choice(rp.REQUEST_VARIANTS)
        auto = rp.CONFIGS[config][2]
        body = {"messages": [{"role": "user", "content": "hi"}], "model": "m", **variant}
        request = ChatCompletionRequest.model_validate(body)
        kwargs = request.build_chat_params(None, "auto", None).chat_template_kwargs
        parser = theirs[config](tok, request.tools, chat_template_kwargs=kwargs, model_config=None)
        try:
            parsed = parser.parse(text, request, enable_auto_tools=auto)
        except Exception:
            crashes += 1
            continue
        fields = assemble_chat_message_fields(
            request, *parsed, enable_auto_tools=auto, parser_cls=theirs[config]
        )
        expected = (fields.reasoning, fields.content,
                    [(t.function.name, t.function.arguments) for t in fields.tool_calls])
        msg = parse_message(ours[config], ParseRequest.from_body(variant), text, [], "stop")
        got = (msg.reasoning, msg.content,
               [(t["function"]["name"], t["function"]["arguments"]) for t in msg.tool_calls])
        if got != expected:
            bad += 1
            if bad <= 10:
                print("MISMATCH", config, json.dumps(variant)[:80], repr(text)[:300])
                print("  vllm", expected)
                print("  ours", got)
    print(f"{args.n} cases, {bad} mismatches, {crashes} where vLLM raised")


if __name__ == "__main__":
    main()
