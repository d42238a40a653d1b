"""holo2 (vLLM 0.34 ``DeepSeekV3ReasoningWithThinkingParser``) is the
``deepseek_v3`` reasoning parser with thinking on unless ``thinking`` or
``enable_thinking`` is given: R1's split by default, the output as content
when a switch says off.  The recorded fixture
(tests/data/parsers/families/holo2.jsonl.gz) checks the rest."""

from __future__ import annotations

import pytest

from derender_queue.core.parsers import ParseRequest, build_parser_factory
from tests.core.test_parsers_deepseek_v3 import one_shot, streamed

VOCAB = {"<think>": 128821, "</think>": 128822}
TEXT = "plan</think>\n\nanswer"
ON, OFF = ("plan", "\n\nanswer", []), (None, TEXT, [])


@pytest.mark.parametrize(
    ("kwargs", "want"),
    [
        (None, ON),
        ({"thinking": None}, ON),
        ({"other": 1}, ON),
        ({"thinking": True}, ON),
        ({"enable_thinking": True, "thinking": False}, ON),
        ({"thinking": False}, OFF),
        ({"enable_thinking": False}, OFF),
        ({"thinking": None, "enable_thinking": 0}, OFF),
    ],
)
def test_holo2_thinks_unless_told_not_to(kwargs, want):
    factory = build_parser_factory("holo2", None, vocab=VOCAB, enable_auto_tools=False)
    request = ParseRequest.from_body({} if kwargs is None else {"chat_template_kwargs": kwargs})
    assert one_shot(factory, request, TEXT) == want
    assert streamed(factory, request, TEXT, [2, 7, 13]) == want


def test_deepseek_v3_still_thinks_only_when_asked():
    factory = build_parser_factory("deepseek_v3", None, vocab=VOCAB, enable_auto_tools=False)
    assert one_shot(factory, ParseRequest.from_body({}), TEXT) == OFF
