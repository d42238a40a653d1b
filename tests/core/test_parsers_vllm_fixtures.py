"""Differential test: replay outputs recorded from the real vLLM 0.33.

The fixtures come from ``tools/parsers/record_parsers.py`` (run it with
the vLLM reference venv to refresh them): several hundred outputs across ten
reasoning/tool parser configurations and request variants.  Each case is
parsed one-shot with ``parse_message`` and must equal vLLM's assembled
message field for field; tool call ids are random in vLLM, so only their
shape is compared.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest

from derender_queue.core.parsers import (
    ParseRequest,
    ParserFactory,
    ParserInputError,
    build_parser_factory,
    parse_message,
    resolve_chat_template_kwargs,
)

DATA = Path(__file__).parents[1] / "data" / "parsers" / "vllm_parser_cases.json"
FIXTURES = json.loads(DATA.read_text())
META = FIXTURES["meta"]
CASES = FIXTURES["cases"]
ID_RE = re.compile(r"^chatcmpl-tool-[0-9a-f]{16}$")
VOCAB = {"<think>": 128821, "</think>": 128822}


@cache
def factory_for(config: str) -> ParserFactory | None:
    reasoning, tool, auto = META["configs"][config]
    return build_parser_factory(
        reasoning, tool, vocab=VOCAB, enable_auto_tools=auto,
        special_tokens=META["special_tokens"],
    )


def _case_id(i: int) -> str:
    return f"{i}-{CASES[i]['config']}"


def test_fixture_count() -> None:
    # Recorded from vLLM 0.33.0; keep the corpus from silently shrinking.
    assert META["vllm_version"] == "0.33.0"
    assert len(CASES) >= 600


@pytest.mark.parametrize("i", range(len(CASES)), ids=_case_id)
def test_matches_vllm(i: int) -> None:
    case = CASES[i]
    expected = case["expected"]
    body = dict(case["request"])
    if body.get("tools") == "$TOOLS":
        body["tools"] = META["tools"]
    if "error" in expected:
        with pytest.raises(ParserInputError) as exc:
            ParseRequest.from_body(body)
        assert str(exc.value) == expected["error"]
        assert exc.value.parameter == expected["parameter"]
        return
    assert resolve_chat_template_kwargs(body) == case["resolved_chat_template_kwargs"]
    request = ParseRequest.from_body(body, prompt_token_ids=case["prompt_token_ids"])
    factory = factory_for(case["config"])
    assert factory is not None
    msg = parse_message(factory, request, case["text"], case["token_ids"], case["finish_reason"])
    got_calls = []
    for call in msg.tool_calls:
        assert ID_RE.match(call["id"]), call
        got_calls.append({k: v for k, v in call.items() if k != "id"})
    assert {
        "reasoning": msg.reasoning,
        "content": msg.content,
        "tool_calls": got_calls,
        "finish_reason": msg.finish_reason,
    } == expected
    assert msg.hide_token_metadata == (not request.include_reasoning)
