"""Record vLLM 0.33's chat parser results as differential fixtures.

Run with the vLLM reference venv (NOT the project venv)::

    VLLM_TARGET_DEVICE=cpu /work/peer/venv/bin/python \
        tools/parsers/record_parsers.py [--model /work/peer/model]

It builds each parser exactly like ``OnlineDerenderer._parse_and_assemble``:
``ParserManager.get_parser`` with the DeepSeek V4 tokenizer, a validated
``ChatCompletionRequest`` (messages=[{"role":"user","content":"hi"}]), the
resolved chat_template_kwargs, ``set_prompt_token_ids``, ``parse()``,
``assemble_chat_message_fields`` and ``resolve_finish_reason``.  Inputs and
outputs go to ``vllm_parser_cases.json`` next to this file.  Tool call ids
are random in vLLM, so only their shape is recorded.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import re
import sys
import types
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

# vllm.parser.engine.registered_adapters imports vllm.parser.mistral, which
# needs mistral_common (absent from the reference venv).  The Mistral parser
# is never used here, so an empty stand-in module is enough.
_mistral = types.ModuleType("vllm.parser.mistral")
_mistral.MistralParser = type("MistralParser", (), {})  # type: ignore[attr-defined]
sys.modules.setdefault("vllm.parser.mistral", _mistral)

OUT = Path(__file__).resolve().parents[2] / "tests" / "data" / "parsers" / "vllm_parser_cases.json"
ID_RE = re.compile(r"^chatcmpl-tool-[0-9a-f]{16}$")
D = "｜DSML｜"
EOS = "<｜end▁of▁sentence｜>"
BOS = "<｜begin▁of▁sentence｜>"

CONFIGS = {
    # name: (reasoning_parser, tool_parser, enable_auto_tools)
    "r1+hermes": ("deepseek_r1", "hermes", True),
    "v4+v4": ("deepseek_v4", "deepseek_v4", True),
    "r1": ("deepseek_r1", None, False),
    "hermes": (None, "hermes", True),
    "v4tools": (None, "deepseek_v4", True),
    "v4": ("deepseek_v4", None, False),
    "r1+v4tools": ("deepseek_r1", "deepseek_v4", True),
    "v4+hermes": ("deepseek_v4", "hermes", True),
    "v4+v4/noauto": ("deepseek_v4", "deepseek_v4", False),
    "r1+hermes/noauto": ("deepseek_r1", "hermes", False),
}

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string"},
                    "days": {"type": "integer"},
                    "unit": {"type": "string", "enum": ["c", "f"]},
                    "detail": {"type": ["boolean", "null"]},
                    "ratio": {"type": "number"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "opts": {
                        "type": "object",
                        "properties": {"n": {"type": "integer"}},
                    },
                },
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "k": {"type": "int"}},
            },
        },
    },
    {"type": "function", "function": {"name": "noargs"}},
]

REQUEST_VARIANTS: list[dict] = [
    {},
    {"tools": TOOLS},
    {"tools": TOOLS, "tool_choice": "auto"},
    {"tools": TOOLS, "tool_choice": "none"},
    {"tools": TOOLS, "tool_choice": "required"},
    {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "search"}}},
    {"tools": TOOLS, "tool_choice": None},
    {"tools": TOOLS, "parallel_tool_calls": False},
    {"tools": TOOLS, "include_reasoning": False},
    {"include_reasoning": False},
    {"tool_choice": "none"},
    {"chat_template_kwargs": {"thinking": False}},
    {"chat_template_kwargs": {"thinking": True}, "tools": TOOLS},
    {"chat_template_kwargs": {"enable_thinking": False}, "tools": TOOLS},
    {"reasoning_effort": "none", "tools": TOOLS},
    {"reasoning_effort": "high"},
    {"chat_template_kwargs": {"reasoning_effort": "none", "thinking": True}},
]

TOOL_VARIANTS = [v for v in REQUEST_VARIANTS if "tools" in v]

PROMPTS = [None, [0, 100, 128821], [0, 100, 128821, 128822], [0, 128822, 5]]
FINISH = ["stop", "stop", "length", None]


def hermes_call(name="get_weather", args='{"location": "杭州", "days": 3}'):
    return f'<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>'


def dsml_param(name, value, string="true"):
    attr = "" if string is None else f' string="{string}"'
    return f'<{D}parameter name="{name}"{attr}>{value}</{D}parameter>'


def dsml_invoke(name, params, close=True):
    end = f"\n</{D}invoke>" if close else ""
    return f'<{D}invoke name="{name}">\n' + "\n".join(params) + end


def dsml_block(*invokes, start=f"<{D}tool_calls>", close=True):
    end = f"\n</{D}tool_calls>" if close else ""
    return start + "\n" + "\n".join(invokes) + end


INV_WEATHER = dsml_invoke(
    "get_weather",
    [dsml_param("location", "杭州"), dsml_param("days", "5", "false")],
)
INV_SEARCH = dsml_invoke(
    "search", [dsml_param("query", "a \"quoted\" 😀\nline"), dsml_param("k", "3", None)]
)

HANDWRITTEN: list[str] = [
    "",
    "plain answer",
    "  \n ",
    "abc</think>def",
    "abc</think>d<think>e",
    "<think></think>hi",
    "<think>r</think>  ",
    "<think>\nreasoning 思考\n</think>\n\nanswer",
    "x<think>r</think>c",
    "<think>unclosed reasoning",
    "<think>a<think>b</think>c</think>d",
    "</think>",
    "<think>",
    "r  \n</think>",
    "<think>r\n\n</think>\n",
    f"reason{EOS}</think>ans{EOS}",
    f"{BOS}<think>r</think>a",
    "<thi</think>nk>",
    "<think>r</think>c<think>r2</think>c2",
    # hermes
    hermes_call(),
    "pre " + hermes_call(),
    "  \n" + hermes_call(),
    "</think>" + hermes_call(),
    "</think>\n\n" + hermes_call() + "\n",
    "<think>plan</think>intro " + hermes_call() + " middle " + hermes_call("search", '{"query": "q"}') + " tail",
    "</think>" + hermes_call(args='{"nested": {"a": [1, 2.5, null, true]}, "u": "\\u00e9"}'),
    "</think><tool_call>{bad json}</tool_call>",
    "</think>pre <tool_call>{\"name\": \"f\"}</tool_call>",
    "</think><tool_call>{\"name\": 5, \"arguments\": {}}</tool_call>",
    "</think><tool_call>[1, 2]</tool_call>",
    "</think><tool_call></tool_call>",
    "</think><tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}",
    "</think><tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_",
    "</think>" + hermes_call() + "<tool_call>{oops}</tool_call> after",
    "</think>" + hermes_call() + hermes_call("search", '"just a string"'),
    "</think><tool_call>{\"name\": \"f\", \"arguments\": NaN}</tool_call>",
    "</think><tool_call>{\"name\":\"f\",\"arguments\":"
    "{\"x\":1e400, \"y\": -0.0, \"z\": 12345678901234567890}}</tool_call>",
    "</think><tool_call>A<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>",
    "</think>text <tool_call",
    "</think>{\"name\": \"search\", \"arguments\": {\"query\": \"x\"}}",
    '</think>[{"name": "search", "parameters": {"query": "x"}}]',
    "</think>  ",
    # deepseek v4 DSML
    "</think>" + dsml_block(INV_WEATHER),
    "</think>hi " + dsml_block(INV_WEATHER) + " after",
    "</think>\n\n" + dsml_block(INV_WEATHER, INV_SEARCH),
    "思考" + dsml_block(INV_WEATHER),
    dsml_block(INV_WEATHER),
    "</think>" + dsml_block(INV_WEATHER, start=f"<{D}toolcalls>"),
    "</think>" + dsml_block(INV_WEATHER, start=f"<{D}tool>"),
    "</think>" + dsml_block(INV_WEATHER, close=False),
    "</think>" + dsml_block(dsml_invoke("get_weather", [dsml_param("location", "x")], close=False)),
    "</think>" + dsml_block(dsml_invoke("get_weather", [dsml_param("location", "x")], close=False), close=False),
    "</think>" + INV_WEATHER,
    "</think>" + dsml_block(dsml_invoke("", [dsml_param("x", '{"name": "search"}', "false")])),
    "</think>" + dsml_block(dsml_invoke(" ", ['{"name": "search", "arguments": {"query": 1}}'])),
    "</think>" + dsml_block(dsml_invoke("", ['{"name": "search", "parameters": {"q": 1}}'])),
    "</think>" + dsml_block(dsml_invoke("  search  ", [dsml_param("query", "q")])),
    "</think>" + dsml_block(dsml_invoke("get_weather", [
        dsml_param("days", "7", "true"),
        dsml_param("ratio", "0.5", "true"),
        dsml_param("detail", "true", "true"),
        dsml_param("tags", '["a", "b"]', "false"),
        dsml_param("opts", '{"n": "4"}', "false"),
        dsml_param("unit", "c", None),
        dsml_param("bad", "{not json", "false"),
    ])),
    "</think>" + dsml_block(dsml_invoke("search", [dsml_param("arguments", '{"query": "wrapped"}', "false")])),
    "</think>" + dsml_block(dsml_invoke("search", [dsml_param("input", '{"query": "w", "k": 2}', "true")])),
    "</think>" + dsml_block(dsml_invoke("search", [dsml_param("arguments", '{"nope": 1}', "false")])),
    "</think>" + dsml_block(
        dsml_invoke("get_weather", [dsml_param("arguments", '{"location": "x"}', "false")]),
        dsml_invoke("search", [dsml_param("arguments", '{"location": "x"}', "false")]),
    ),
    "</think>" + dsml_block(dsml_invoke("get_weather", [
        f'<{D}parameter name="location" string="true">first',
        f'<{D}parameter name="days" string="false">2',
    ])),
    "</think>" + dsml_block(dsml_invoke("get_weather", [
        dsml_param("location", "a"), dsml_param("location", "b"),
    ])),
    "</think>" + dsml_block(dsml_invoke("get_weather", [
        f'<{D}parameter  name="location"   string="true"  >spaced</{D}parameter>',
        f'<{D}parameter\x1cname="days" string="false">1</{D}parameter>',
    ])),
    "</think>" + dsml_block(dsml_invoke("noargs", [])),
    "</think>" + dsml_block(dsml_invoke("unknown_tool", [dsml_param("z", "1", "false")])),
    "</think>" + dsml_block(dsml_invoke("search", [dsml_param("query", "has <think> and </think> inside")])),
    "</think>" + dsml_block(dsml_invoke("search", [dsml_param("query", f"eos{EOS}inside")])),
    f"</think>{EOS}" + dsml_block(INV_WEATHER) + EOS,
    "</think>" + dsml_block() + " trailing text",
    f"</think>x <{D}tool_calls></{D}tool_calls> y",
    f"</think>a </{D}tool_calls> b \">c <{D}parameter d",
    "<think>reasoning then tool" + dsml_block(INV_WEATHER),
    "<think>r</think>c <think>more" + dsml_block(INV_WEATHER),
    "</think>c <think>hidden</think> d " + dsml_block(INV_SEARCH),
    "</think>" + dsml_block(INV_WEATHER) + "\n" + dsml_block(INV_SEARCH),
    "</think>" + dsml_block(INV_WEATHER + "\n" + f"</{D}tool_calls>" + "\n" + INV_SEARCH),
    f"</think><{D}invoke name=\"search\"><{D}invoke name=\"x\">",
    f'</think><{D}invoke name="search">">extra',
    "</think>  \n" + dsml_block(INV_WEATHER),
    "</think>" + dsml_block(dsml_invoke("search", [dsml_param("query", "a" * 300 + "\n" * 3)])),
]


def random_texts(rng: random.Random, n: int) -> list[str]:
    words = ["hello", "世界", "😀", " ", "\n", "\t", "x", '"', ">", "<", "{", "}",
             "answer: 42", "éß", "\u00a0", "\x1c"]
    think = ["<think>", "</think>", "<think>\n", "\n</think>\n\n"]
    tools = [
        hermes_call(), hermes_call("search", '{"query": "q", "k": 2}'),
        "<tool_call>{bad}</tool_call>", "<tool_call>", "</tool_call>",
        dsml_block(INV_WEATHER), dsml_block(INV_SEARCH), INV_SEARCH,
        f"<{D}tool_calls>", f"</{D}tool_calls>", f'<{D}invoke name="', '">',
        dsml_param("location", "p"), f"</{D}invoke>", EOS,
    ]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 9)):
            r = rng.random()
            pool = think if r < 0.25 else tools if r < 0.55 else words
            parts.append(rng.choice(pool))
        # Half start after reasoning, else deepseek_r1 sees only reasoning.
        out.append(("</think>" if rng.random() < 0.5 else "") + "".join(parts))
    return out


def build_cases(rng: random.Random) -> list[dict]:
    cases = []
    texts = HANDWRITTEN + random_texts(rng, 160)
    config_names = list(CONFIGS)
    for i, text in enumerate(texts):
        # Every text under the two main configs plus a rotating third.
        # Each main config once with any request and once with tools.
        picks = [
            ("r1+hermes", REQUEST_VARIANTS[i % len(REQUEST_VARIANTS)]),
            ("v4+v4", REQUEST_VARIANTS[(i + 7) % len(REQUEST_VARIANTS)]),
            ("r1+hermes", TOOL_VARIANTS[i % len(TOOL_VARIANTS)]),
            ("v4+v4", TOOL_VARIANTS[(i + 3) % len(TOOL_VARIANTS)]),
            (config_names[i % len(config_names)],
             REQUEST_VARIANTS[(i * 5) % len(REQUEST_VARIANTS)]),
        ]
        for j, (config, variant) in enumerate(picks):
            cases.append({
                "config": config,
                "request": variant,
                "text": text,
                "prompt_token_ids": PROMPTS[(i + j) % len(PROMPTS)],
                "finish_reason": FINISH[(i + 2 * j) % len(FINISH)],
            })
    # Request validation errors (vLLM: 400).
    for body in [
        {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
        {"tool_choice": "auto"},
        {"tools": []},
        {"tools": TOOLS, "tool_choice": "sometimes"},
        {"tools": TOOLS, "tool_choice": {"type": "function", "function": {}}},
        {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": ""}}},
    ]:
        cases.append({"config": "r1+hermes", "request": body, "text": "x",
                      "prompt_token_ids": None, "finish_reason": "stop"})
    return cases


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="/work/peer/model")
    ap.add_argument("--seed", type=int, default=20240633)
    args = ap.parse_args()

    import vllm
    from vllm.entrypoints.openai.chat_completion.message_assembly import (
        assemble_chat_message_fields,
    )
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.entrypoints.serve.utils.tool_calls_utils import resolve_finish_reason
    from vllm.exceptions import VLLMValidationError
    from vllm.parser import ParserManager
    from vllm.tokenizers import get_tokenizer

    # Hermes logs every JSON failure with a traceback; keep the output quiet.
    logging.getLogger("vllm").setLevel(logging.CRITICAL)
    tok = get_tokenizer(args.model)
    parser_classes = {
        name: ParserManager.get_parser(
            tool_parser_name=tp, reasoning_parser_name=rp,
            enable_auto_tools=auto, tokenizer=tok,
        )
        for name, (rp, tp, auto) in CONFIGS.items()
    }

    cases = build_cases(random.Random(args.seed))
    for case in cases:
        _rp, _tp, auto = CONFIGS[case["config"]]
        body = {"messages": [{"role": "user", "content": "hi"}], "model": "m"}
        body.update(case["request"])
        try:
            request = ChatCompletionRequest.model_validate(body)
        except VLLMValidationError as e:
            case["expected"] = {"error": e.args[0], "parameter": e.parameter}
            continue
        # As OnlineDerenderer._resolve_chat_template_kwargs (no server defaults).
        ctk = request.build_chat_params(None, "auto", None).chat_template_kwargs
        parser_cls = parser_classes[case["config"]]
        parser = parser_cls(tok, request.tools, chat_template_kwargs=ctk, model_config=None)
        if case["prompt_token_ids"] is not None:
            parser.set_prompt_token_ids(case["prompt_token_ids"])
        text = case["text"]
        token_ids = tok.encode(text, add_special_tokens=False) if text else []
        case["token_ids"] = token_ids
        case["resolved_chat_template_kwargs"] = ctk
        reasoning, content, tool_calls = parser.parse(
            text, request, enable_auto_tools=auto, model_output_token_ids=token_ids
        )
        fields = assemble_chat_message_fields(
            request, reasoning, content, tool_calls,
            enable_auto_tools=auto, parser_cls=parser_cls,
        )
        calls = [tc.model_dump() for tc in fields.tool_calls]
        for call in calls:
            assert ID_RE.match(call.pop("id")), call
        case["expected"] = {
            "reasoning": fields.reasoning,
            "content": fields.content,
            "tool_calls": calls,
            "finish_reason": resolve_finish_reason(
                case["finish_reason"], request, bool(fields.tool_calls)
            ),
        }
    meta = {"vllm_version": vllm.__version__, "tokenizer": "DeepSeek V4",
            "special_tokens": list(tok.all_special_tokens), "configs": CONFIGS}
    # One case per line keeps the file small and diffs readable.
    meta["tools"] = TOOLS
    for c in cases:  # the shared tool list is stored once, in meta
        if c["request"].get("tools") is TOOLS:
            c["request"] = c["request"] | {"tools": "$TOOLS"}
    lines = [json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in cases]
    OUT.write_text(
        '{"meta": ' + json.dumps(meta, ensure_ascii=False)
        + ',\n"cases": [\n' + ",\n".join(lines) + "\n]}\n"
    )
    print(f"recorded {len(cases)} cases -> {OUT}")


if __name__ == "__main__":
    main()
