"""hf / beam (vLLM 0.34's response-template parsers, parsers/response_template.py).

The recorded fixture (``tests/data/parsers/families/hf.jsonl.gz``, replayed by
test_parser_families.py) checks the answers against vLLM; here: what the
server refuses when the model loads, as vLLM does, what is not served (pattern
anchors), and the engine's promise for this stage: any chunking, with the
parser rebuilt from its JSON state at every boundary, folds to the
non-streaming answer.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.test_parser_engine import one_shot, streamed

sys.path.append(str(Path(__file__).parents[1] / "golden" / "parsers"))

from cases_hf import TEMPLATE, TOOLS

from derender_queue.core.parsers import ParseRequest, build_parser_factory

PROMPTS = {1: "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n", 2: "<think>\n", 3: "<tool_", 4: "x</thi"}


def decode(ids: list[int]) -> str:
    return "".join(PROMPTS[i] for i in ids)


def factory(reasoning: str | None = "hf", tools: str | None = "hf", template=TEMPLATE):
    return build_parser_factory(reasoning, tools, vocab={}, enable_auto_tools=True, response_template=template,
                                decode=decode)  # fmt: skip


def test_refused_as_vllm_refuses():
    with pytest.raises(ValueError, match="cannot be combined"):
        factory("hf", "hermes")
    with pytest.raises(ValueError, match="cannot be combined"):
        factory("hf", "beam")
    with pytest.raises(ValueError, match="response_template"):
        factory(template=None)
    no_tools = copy.deepcopy(TEMPLATE)
    del no_tools["fields"]["tool_calls"]
    with pytest.raises(ValueError, match="tool_calls field"):
        factory(template=no_tools)
    assert factory(tools=None, template=no_tools) is not None
    # Without auto tools no tool parser is selected, so nothing is combined.
    assert build_parser_factory("hf", "hermes", vocab={}, enable_auto_tools=False, response_template=TEMPLATE)


def test_pattern_anchors_are_not_served():
    template = copy.deepcopy(TEMPLATE)
    template["fields"]["tool_calls"]["open_pattern"] = template["fields"]["tool_calls"].pop("open")
    with pytest.raises(ValueError, match="not served"):
        factory(template=template)
    template = copy.deepcopy(TEMPLATE)
    template["fields"]["content"]["close"] = ["<|im_end|>", "<|im_end|>\n"]
    with pytest.raises(ValueError, match="prefixes"):
        factory(template=template)


def test_answers():
    auto = ParseRequest.from_body({"tools": TOOLS})
    call = '<tool_call>{"name": "get_weather", "arguments": {"days": "5"}}</tool_call>'
    assert one_shot(factory(), auto, "<think>plan</think>Hi" + call, [1]) == (
        "plan", "Hi", [("get_weather", '{"days": 5}')])
    # The prompt opened thinking; tools off: the region is content, delimiters and all.
    none = ParseRequest.from_body({"tools": TOOLS, "tool_choice": "none"})
    assert one_shot(factory(), none, "plan</think>Hi" + call, [1, 2]) == (
        "plan", "Hi" + call, [])
    # A delimiter the prompt left half-written is completed by the output.
    assert one_shot(factory(), auto, 'call>{"name": "noargs", "arguments": {}}</tool_call>', [1, 3]) == (
        None, None, [("noargs", "{}")])


FRAGMENTS = ["<think>", "</think>", "</thi", "<tool_call>", "</tool_call>", "<tool_", "<|im_end|>", "<|im_",
             "<|endoftext|>", "plan", " ", "\n", "Hi", '{"name": "get_weather", "arguments": {"days": "5"}}',
             '{"name": "search", "arguments": {"k": 1}}', "{bad", "x", "é😀"]  # fmt: skip
REQUESTS = [ParseRequest.from_body(b) for b in (
    {"tools": TOOLS}, {"tools": TOOLS, "tool_choice": "none"}, {"tools": TOOLS, "tool_choice": "required"},
    {"tools": TOOLS, "parallel_tool_calls": False}, {"include_reasoning": False}, {})]  # fmt: skip
PAIRS = [("hf", "hf"), ("beam", None), (None, "beam")]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(st.sampled_from(FRAGMENTS), max_size=12),
    data=st.data(),
    which=st.integers(0, len(PAIRS) - 1),
    req=st.integers(0, len(REQUESTS) - 1),
    prompt=st.sampled_from([None, [1], [1, 2], [1, 3], [1, 2, 4]]),
)
def test_any_chunking_and_state_round_trip_equal_one_shot(parts, data, which, req, prompt):
    text = "".join(parts)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    fac, request = factory(*PAIRS[which]), REQUESTS[req]
    whole = one_shot(fac, request, text, prompt)
    assert streamed(fac, request, text, cuts, prompt) == whole
    assert len(json.dumps(fac(request).to_state())) < 400
