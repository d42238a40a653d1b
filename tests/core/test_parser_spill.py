"""Held text in the store (core/parsers/spill.py, buffer.py).

Every family's recorded cases, streamed with a store that takes all but the
last 2 characters of any held text past 8 (so every buffer of every stage
goes there, and marker searches reach into it), or all but the last 32 past
64 (growing passages append to a stored buffer), answer exactly as without
one. A held output's state stays bounded while an inline one grows; a
retried chunk writes the same bytes; a second use of an earlier state, an
expired key or a derender without a store is a 400, never another text.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from derender_queue.core.parsers.buffer import TextBuffer
from derender_queue.core.parsers.spill import HeldTextNeeded, Spill, call_spilled
from derender_queue.errors import DerenderError
from tests.core.test_parser_passage import COHERE_LONG_OUTPUTS, cohere_case
from tests.helpers.stream_support import PARSER_CONFIGS, Spilling, derenderers_for, fold_chat, run_stream

HERE = Path(__file__).parents[1]
sys.path.append(str(HERE / "golden" / "parsers"))

import ours_family  # noqa: E402

FIXTURES = sorted((HERE / "data" / "parsers" / "families").glob("*.jsonl.gz"))
CASES_PER_FAMILY = 25


def with_store(derenderer, inline_chars: int = 8, tail_chars: int = 2) -> Spilling:
    """By default a store that takes all but 2 characters of any buffer past 8."""
    return Spilling(derenderer, inline_chars, tail_chars)


@pytest.mark.parametrize("sizes", [(8, 2), (64, 32)], ids=["8-2", "64-32"])
@pytest.mark.parametrize("path", FIXTURES, ids=[p.name.split(".")[0] for p in FIXTURES])
def test_a_family_answers_the_same_with_its_held_text_in_the_store(path, sizes, tmp_path):
    """(8, 2): every buffer goes there, marker searches read it back; (64, 32):
    growing passages append to a stored buffer's inline rest (stream_parse.py)."""
    meta, cases = ours_family.load(path)
    writes = 0
    for key, der in ours_family.derenderers(meta["family"], meta["pairs"], tmp_path).items():
        spilled = with_store(der, *sizes)
        for case in cases[:CASES_PER_FAMILY]:
            assert ours_family.ours(spilled, case) == ours_family.ours(der, case), (key, case["ids"])
            assert not spilled.store, "a stream that ended leaves no text behind"
        writes += spilled.writes
    assert writes or meta["family"] in {"hf", "hf_xml"}, "the store was never written"


@pytest.mark.parametrize("sizes", [(8, 2), (64, 32)], ids=["8-2", "64-32"])
@pytest.mark.parametrize(("pair", "text"), COHERE_LONG_OUTPUTS, ids=[p for p, _ in COHERE_LONG_OUTPUTS])
def test_cohere_streaming_early_from_a_stored_block_answers_as_without_a_store(pair, text, sizes, tmp_path):
    """Cohere's passage sends the text it appends to a stored block, its
    withheld whitespace carried in the state (test_parser_passage.py)."""
    der = ours_family.derenderers("cohere", [pair], tmp_path)[pair]
    spilled = with_store(der, *sizes)
    for one_token in (True, False):
        case = cohere_case(tmp_path, text, one_token)
        assert ours_family.ours(spilled, case) == ours_family.ours(der, case)
    assert spilled.writes and not spilled.store


def _held_stream(n: int = 80) -> tuple[object, dict, list[dict]]:
    """DeepSeek R1 + Hermes: text before `</think>` is held until it comes."""
    der = derenderers_for({"r1_hermes": PARSER_CONFIGS["r1_hermes"]})["r1_hermes"]
    tok = der.registry.get(None).vocab.tokenizer
    text = ("Thinking about 東京 🚀 and the weather, at length. " * n + "</think>\n\nSunny."
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "東京"}}\n</tool_call>')
    ids = tok.encode(text, add_special_tokens=False).ids
    base = {"model": "deepseek-v4", "prompt_token_ids": [1, 2, 3], "chat_request": {
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]}}
    chunks = [{"request_id": "r", "choices": [{"index": 0, "token_ids": ids[i:i + 2]}]} for i in range(0, len(ids), 2)]
    chunks[-1]["choices"][0]["finish_reason"] = "stop"
    return der, base, chunks


def _opaque_sizes(responses: list[dict]) -> list[int]:
    return [len(r["stream_state"]["opaque"]) for r in responses]


def test_a_held_output_keeps_a_bounded_state_and_folds_as_without_a_store():
    der, base, chunks = _held_stream(80)
    inline = run_stream(der, "chat", base, chunks)
    spilled = with_store(der, 512, 64)
    stored = run_stream(spilled, "chat", base, chunks)
    assert fold_chat(stored) == fold_chat(inline)
    assert fold_chat(stored)["calls"] == [("get_weather", '{"city": "東京"}')]
    assert max(_opaque_sizes(inline)) > 5000  # the held reasoning rides in the state
    assert max(_opaque_sizes(stored)) < 1200
    assert spilled.writes > 5
    assert spilled.store == {}, "the finished stream's text is dropped"


def _half_way(n: int = 40):
    """A derenderer with a store, the stream, and the responses up to half of it."""
    der, base, chunks = _held_stream(n)
    spilled = with_store(der, 64, 8)
    half = len(chunks) // 2
    responses = run_stream(spilled, "chat", base, chunks[:half])
    assert spilled.store, "text went to the store"
    return spilled, base, chunks, half, responses


def _body(base: dict, gen: dict, state: dict) -> bytes:
    return json.dumps({**base, "stream": True, "generate_chunk": gen, "stream_state": state}).encode()


def test_a_retried_chunk_writes_the_same_bytes_and_answers_the_same():
    spilled, base, chunks, half, responses = _half_way()
    state = responses[-2]["stream_state"]
    first = json.loads(spilled.derender("chat", _body(base, chunks[half - 1], state)).body)
    store = {k: bytes(v) for k, v in spilled.store.items()}
    again = json.loads(spilled.derender("chat", _body(base, chunks[half - 1], state)).body)
    assert {**again["chunk"], "created": 0} == {**first["chunk"], "created": 0}
    assert again["stream_state"] == first["stream_state"] == responses[-1]["stream_state"]
    assert {k: bytes(v) for k, v in spilled.store.items()} == store
    rest = run_stream(spilled, "chat", base, chunks[half:], again["stream_state"])
    assert fold_chat(responses + rest) == fold_chat(run_stream(spilled.derenderer, "chat", base, chunks))


def test_held_text_that_expired_is_a_400():
    spilled, base, chunks, half, responses = _half_way()
    spilled.store.clear()
    with pytest.raises(DerenderError) as err:
        run_stream(spilled, "chat", base, chunks[half:], responses[-1]["stream_state"])
    assert err.value.status == 400 and err.value.param == "stream_state"
    assert "gone from the service's store" in err.value.message


def test_a_second_use_of_an_earlier_state_that_overwrote_the_text_is_a_400():
    spilled, base, chunks, half, responses = _half_way()
    for key in spilled.store:  # what another fork of the stream wrote at the same offsets
        spilled.store[key] = bytearray(b"x" * len(spilled.store[key]))
    with pytest.raises(DerenderError) as err:
        run_stream(spilled, "chat", base, chunks[half:], responses[-1]["stream_state"])
    assert err.value.status == 400 and "used again and overwrote it" in err.value.message


def test_a_state_that_refers_to_the_store_is_a_400_where_there_is_none():
    spilled, base, chunks, half, responses = _half_way()
    with pytest.raises(DerenderError) as err:
        run_stream(spilled.derenderer, "chat", base, chunks[half:], responses[-1]["stream_state"])
    assert err.value.status == 400 and "a store this derender cannot reach" in err.value.message


def test_a_buffer_goes_to_the_store_past_its_inline_size_and_reads_back():
    spill = Spill({}, inline_chars=10, tail_chars=3)
    buf = TextBuffer()
    buf.append("東京 hello, world")
    dumped = call_spilled(spill, buf.dump)
    assert isinstance(dumped, list) and dumped[4] == "rld"
    (key, offset, data), = spill.writes
    assert offset == 0 and data == "東京 hello, wo".encode()
    later = Spill({})
    back = call_spilled(later, lambda: TextBuffer(dumped))
    assert len(back) == len("東京 hello, world") and later.loaded == [key]
    assert call_spilled(later, lambda: back.tail(3)) == "rld", "the inline tail needs no read"
    with pytest.raises(HeldTextNeeded):
        call_spilled(later, lambda: back.tail(4))
    assert later.needs == {key}
    fetched = Spill({key: data})
    assert call_spilled(fetched, lambda: TextBuffer(dumped).value()) == "東京 hello, world"
    back = TextBuffer(dumped)
    back.append("!" * 20)
    again = Spill({key: data}, inline_chars=10, tail_chars=3)
    redumped = call_spilled(again, back.dump)
    assert again.writes == [(key, len(data), b"rld" + b"!" * 17)]
    assert redumped[:3] == [key, len("東京 hello, world!!!!!!!!!!!!!!!!!"), len(data) + 20]


def test_without_a_store_a_buffer_dumps_its_text():
    buf = TextBuffer()
    buf.append("x" * 5000)
    assert buf.dump() == "x" * 5000
