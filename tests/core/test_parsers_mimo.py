"""mimo (vLLM 0.34 parser/mimo.py) is Qwen3's grammar with verbatim
parameter values: what Qwen3 trims (one wrapping newline each side), MiMo
keeps; the schema still re-types them.  The recorded fixture
(tests/data/parsers/families/mimo.jsonl.gz) checks the rest."""

from __future__ import annotations

from derender_queue.core.parsers import ParseRequest, build_parser_factory
from tests.core.test_parsers_deepseek_v3 import one_shot, streamed

VOCAB = {"<think>": 128821, "</think>": 128822, "<|im_start|>": 129282, "<|im_end|>": 129283}
TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}, "k": {"type": "integer"}}}}}]
CALL = ("<tool_call>\n<function=search>\n<parameter=query>\nq\n</parameter>\n<parameter=k>\n5\n</parameter>\n"
        "</function>\n</tool_call>")


def test_mimo_keeps_parameter_values_verbatim():
    request = ParseRequest.from_body({"tools": TOOLS})
    mimo = build_parser_factory("mimo", "mimo", vocab=VOCAB, enable_auto_tools=True, special_tokens=[])
    qwen3 = build_parser_factory("qwen3", "qwen3_coder", vocab=VOCAB, enable_auto_tools=True, special_tokens=[])
    text = "plan</think>Sure " + CALL
    want = ("plan", "Sure", [("search", '{"query": "\\nq\\n", "k": 5}')])
    assert one_shot(mimo, request, text) == want
    assert streamed(mimo, request, text, [10, 40, 90]) == want
    assert one_shot(qwen3, request, text)[2] == [("search", '{"query": "q", "k": 5}')]
