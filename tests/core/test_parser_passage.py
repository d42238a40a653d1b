"""The streaming fast path (core/parsers/passage.py) checked against the parser itself.

A chunk whose text the carried parser state's `Passage` vouches for is routed
without resuming the parser (core/stream_parse.py's `parse_chunk`).  Here every such
chunk of every family's fixture streams (tests/data/parsers/families, the
recorded 1-4-token chunks) is also fed to the parser resumed from that state:
its delta must be the passage's (the text, less any trailing whitespace the
stage holds, in the passage's field) and its state afterwards the one the fast
path carried on (the state before, or the learnt one holding that whitespace).  A chunk
a growing passage appends to its stage's buffer in the state (passage.py `holding`) is
checked the same way: the parser's own delta (none, or what a sending passage
sends: Cohere's answer streamed early) and its state after it.  The fixtures'
answers themselves are test_parser_families.py's.
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path

import pytest

from derender_queue.core import stream, stream_parse
from derender_queue.core.parsers import ParsedDelta, Passage
from derender_queue.core.parsers.lexer import LiteralLexer
from derender_queue.core.stream_state import expand

HERE = Path(__file__).parents[1]
sys.path.append(str(HERE / "golden" / "parsers"))

import ours_family  # noqa: E402

FIXTURES = sorted((HERE / "data" / "parsers" / "families").glob("*.jsonl.gz"))
CASES_PER_FAMILY = 60  # the first of each fixture: enough chunks in every state the families reach


@pytest.fixture
def checked_parse(monkeypatch):
    """stream.parse_chunk, checking each chunk its passage routes; counts them."""
    original = stream.parse_chunk
    routed: Counter[str] = Counter()
    grown = []
    took = stream_parse._grown

    def grow(run, s, text):
        got = took(run, s, text)
        grown.append(got is not None)
        return got

    monkeypatch.setattr(stream_parse, "_grown", grow)

    def parse(run, s, text, ids, final):
        before = s.parser
        known = run.passages.get(stream_parse._state_key(before)) if text and not final else None
        grown.clear()
        got = original(run, s, text, ids, final)
        if any(grown):  # a growing passage appended the text to its buffer in the state
            parser = run.factory(run.parse_request, state=expand(before, run.parser_ref))
            assert parser.feed(text, ids) == got, (text, before)
            assert parser.to_state() == expand(s.parser, run.parser_ref), (text, before)
            routed["grown"] += 1
            routed["grown and sent"] += got != ParsedDelta()
            return got
        if known is not None and (route := known.passage.route(text)) is not None:
            parser = run.factory(run.parse_request, state=None if before is None else expand(before, run.parser_ref))
            sent, held = route
            assert parser.feed(text, ids) == got == known.passage.delta(sent), (text, before)
            assert parser.to_state() == expand(s.parser, run.parser_ref), (text, before)
            routed[known.passage.field or "dropped"] += 1
            routed["held"] += bool(held)
            # read on from a lexer's held suffix, or not one plain run holding nothing (Passage.holds)
            routed["scanned"] += isinstance(known.passage.held, tuple) or not all(
                lexer.plain(text) for lexer in known.passage.lexers)
        return got

    monkeypatch.setattr(stream, "parse_chunk", parse)
    return routed


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name.split(".")[0] for p in FIXTURES])
def test_a_passage_routes_a_chunk_as_the_parser_would(path, checked_parse, tmp_path):
    meta, cases = ours_family.load(path)
    ders = ours_family.derenderers(meta["family"], meta["pairs"], tmp_path)
    for case in cases[:CASES_PER_FAMILY]:
        for key, der in ders.items():
            got = ours_family.ours(der, case)
            assert ours_family.compare(case, key, got) == [], key


@pytest.mark.parametrize(("family", "pair"), [
    ("qwen3", "qwen3+qwen3_coder"),  # engine stages
    ("deepseek_v4", "deepseek_v4+deepseek_v4"),
    ("qwen3", "qwen3+hermes"),  # the hand-written Hermes stage
    ("deepseek_v4", "deepseek_r1+deepseek_v4"),  # the hand-written R1 stage
])
def test_plain_chunks_take_the_fast_path(family, pair, checked_parse, tmp_path):
    """Not vacuous: these pairs' fixture streams route many chunks by passage."""
    _, cases = ours_family.load(HERE / "data" / "parsers" / "families" / f"{family}.jsonl.gz")
    der = ours_family.derenderers(family, [pair], tmp_path)[pair]
    for case in cases:
        ours_family.ours(der, case)
    assert checked_parse["reasoning"] > 10 and checked_parse["content"] > 10, checked_parse


def test_held_whitespace_takes_the_fast_path_too(checked_parse, tmp_path):
    meta, cases = ours_family.load(HERE / "data" / "parsers" / "families" / "qwen3.jsonl.gz")
    ders = ours_family.derenderers("qwen3", meta["pairs"], tmp_path)
    for case in cases[:CASES_PER_FAMILY]:
        for der in ders.values():
            ours_family.ours(der, case)
    assert checked_parse["held"] > 10, checked_parse  # chunks whose trailing whitespace is held


def test_a_passage_passes_text_without_its_stop_characters():
    p = Passage("content", frozenset("<["))
    assert p.passes(" plain words") and p.passes("é 世界 🙂x") and p.passes("line\n")
    assert not p.passes("a <b") and not p.passes("[") and not p.passes("")
    assert Passage("reasoning", frozenset()).passes("anything <at all> ")
    assert p.split("line\n") == ("line\n", "")
    assert p.delta("x") == ParsedDelta(content="x")
    assert Passage("reasoning", frozenset()).delta("x") == ParsedDelta(reasoning="x")
    assert Passage("", frozenset()).delta("x") == ParsedDelta() and p.delta("") == ParsedDelta()


def test_a_stripping_passage_sends_what_it_held_before_the_next_text():
    p = Passage("reasoning", frozenset("<"), strips=True, lead="\n ")
    assert p.split("x") == ("\n x", "")
    assert p.split("x\n") == ("\n x", "\n")
    assert p.split("  ") == ("", "\n   ")  # whitespace only: all held


def test_a_lexers_first_characters_stop_only_where_it_would_not_read_plain_text():
    lexer = LiteralLexer({"call:": "CALL", ":": "COLON"})
    p = Passage("content", frozenset("<"), lexers=(lexer,))
    assert p.passes("ace") and p.passes("cell c ") and p.passes("plain")
    assert not p.passes("a:b")  # a literal
    assert not p.passes("etc") and not p.passes(" cal")  # a suffix that may grow into one: held
    assert not p.passes("ace <")  # a stop of its own
    assert Passage("content", frozenset(), lexers=(lexer,)).passes("cc c.")


def test_a_passage_into_a_later_stage_stops_on_either_stages_characters():
    first, later = Passage("content", frozenset("<")), Passage("content", frozenset("["), True, " ")
    assert first.then(later) == Passage("content", frozenset("<["), True, " ")
    assert first.then(None) is None  # the later stage cannot vouch: no passage
    reasoning = Passage("reasoning", frozenset("<"))
    assert reasoning.then(None) is reasoning  # reasoning never reaches the tool stage
    a, b = LiteralLexer({"call:": "CALL"}), LiteralLexer({"[x]": "X"})
    both = Passage("content", frozenset(), lexers=(a,)).then(Passage("content", frozenset(), lexers=(b,)))
    assert both is not None and both.lexers == (a, b)
    assert both.passes("ace [y]") and not both.passes("call:") and not both.passes("[x]")


def test_a_lexers_held_suffix_is_read_on_by_its_scan():
    lexer = LiteralLexer({"\n</think>": "END", "</think>": "END", ":": "COLON", "call:": "CALL"})
    fresh = Passage("reasoning", frozenset(), strips=True, lexers=(lexer,), holds=("",), inert=(frozenset({"COLON"}),))
    assert fresh.held == "" and fresh.passes("plain") and fresh.split("plain") == ("plain", "")
    assert fresh.passes("line\n") and fresh.split("line\n") == ("line", ("", "\n"))  # "\n" may begin "\n</think>"
    assert fresh.passes("a \n") and fresh.split("a \n") == ("a", (" ", "\n"))  # whitespace held before it
    assert fresh.passes("a: b") and fresh.split("a: b") == ("a: b", "")  # an inert terminal is its text
    assert fresh.split("etc") == ("et", ("", "c"))
    assert not fresh.passes("a</think>") and not fresh.passes("call:")  # terminals that are not inert
    held = fresh._replace(lead=" ", holds=("\n",))
    assert held.held == (" ", "\n")
    assert held.passes("x") and held.split("x") == (" \nx", "")  # released: nothing held any more
    assert held.passes("\n") and held.split("\n") == ("", (" \n", "\n"))
    assert not held.passes("</think>") and held.passes("</th")  # "\n</th" is held, not read
    assert held.split("</th") == ("", (" ", "\n</th"))
    # a chain: the reasoning stage's content is the tool stage's text
    tools = LiteralLexer({"<tool_call>": "TOOL"})
    later = Passage("content", frozenset(), lexers=(tools,), holds=("<tool",), inert=(frozenset(),))
    chain = Passage("content", frozenset(), lexers=(lexer,), holds=("",), inert=(frozenset(),)).then(later)
    assert chain is not None and chain.held == ("", "", "<tool")
    assert chain.passes("x") and chain.split("x") == ("<toolx", "")
    assert not chain.passes("_call>")  # the tool stage's lexer would read its literal
    assert chain.split("\n") == ("", ("", "\n", "<tool"))  # the first holds: the second is not fed
    chain = Passage("content", frozenset(), lexers=(lexer,), holds=("\n",), inert=(frozenset(),)).then(later)
    assert chain is not None and chain.passes("_call>")  # the first releases "\n" between
    assert chain.split("x<") == ("<tool\nx", ("", "<", ""))  # "<" may begin "</think>": the first holds it
    # a later stage's stop in what the first releases (deepseek_v4's "<" before Hermes' "<")
    hermes = Passage("content", frozenset("<"))
    chain = Passage("content", frozenset(), lexers=(tools,), holds=("<",), inert=(frozenset(),)).then(hermes)
    assert chain is not None and not chain.passes("x") and chain.passes("to")  # "<x" reaches it; "<to" is held
    unheld = Passage("content", frozenset(), lexers=(tools,))  # a stage that holds nothing
    assert Passage("content", frozenset(), lexers=(lexer,), holds=("",), inert=(frozenset(),)).then(unheld) == \
        unheld._replace(lexers=(lexer, tools), holds=("", None), inert=(frozenset(), frozenset()))


# Families whose stages were given passages after the first ones: engine
# stages with an empty UnfinishedHold (plamo3), engine reasoning with
# content_lstrip_newlines (granite_thinking), the identity reasoning stage
# (deepseek_v3's pairs, poolside_v1), poolside_v1's, functiongemma's,
# minimax_m3's and kimi_k3's hand-written stages, the response-template stage
# (hf, hf_xml);
# text with a lexer's first characters that it reads as plain (gemma4's "c" of
# "call:", minimax_m2's quotes); an engine lexer's held suffix (ripple's "\n",
# minimax's quotes, gemma4's ":" read as text; deepseek_v4's held "<" released
# into the Hermes stage, whose stop it is).
LATER_PASSAGES = ["plamo3", "granite_thinking", "poolside_v1", "functiongemma", "minimax_m3", "deepseek_v3",
                  "hf", "hf_xml", "gemma4", "minimax_m2", "gigachat3", "kimi_k3", "ripple", "deepseek_v4"]
CHUNKINGS = 2  # random chunkings per case


def _random_chunks(case: dict, rng) -> dict:
    lens, left = [], len(case["ids"])
    while left > 0:
        n = min(left, rng.choice((1, 1, 1, 2, 3, 5)))
        lens.append(n)
        left -= n
    return {**case, "chunks": lens}


@pytest.mark.parametrize("family", LATER_PASSAGES)
def test_later_passages_route_random_chunkings_as_the_parser_would(family, checked_parse, tmp_path):
    """Every case of the family's fixture in random chunkings, for every pair:
    each chunk a passage routes is checked against the parser, the folded
    stream against the answer; and passages route many chunks (not vacuous)."""

    rng = random.Random(family)
    meta, cases = ours_family.load(HERE / "data" / "parsers" / "families" / f"{family}.jsonl.gz")
    ders = ours_family.derenderers(family, meta["pairs"], tmp_path)
    for case in cases:
        for _ in range(CHUNKINGS):
            chunked = _random_chunks(case, rng)
            for key, der in ders.items():
                assert ours_family.compare(chunked, key, ours_family.ours(der, chunked)) == [], (key, chunked["chunks"])
    assert checked_parse["reasoning"] + checked_parse["content"] > 100, checked_parse


# Kimi K3 text around its passages' lexers: "<" and "|" that begin no marker,
# "<|" that begins none of a body's, partial markers across chunk ends.
_K3_TEXT = ["a", " b", "<", "|", "<b>", "x|y", "<|", "<|close", "|>", "<|close|>", "think", "\n", " ", "世界", "c<",
            "<|sep|>", "<|open|>", "&quot;"]  # fmt: skip


def _k3_case(rng, tokenizer) -> dict:
    import cases_kimi_k3 as k3

    def text(n: int) -> str:
        return "".join(rng.choice(_K3_TEXT[:6] if rng.random() < 0.7 else _K3_TEXT) for _ in range(n))

    think = k3.tag("o", "think") + text(rng.randint(0, 30)).replace("<|close|>", "") + k3.tag("c", "think")
    body = "plain " + text(rng.randint(0, 80))
    call = k3.tools(k3.call("search", k3.arg("query", "q") + k3.arg("k", "5", "number")))
    out = (think if rng.random() < 0.8 else "") + k3.tag("o", "response") + body
    out += rng.choice([k3.tag("c", "response") + call, call, ""]) + rng.choice([k3.tag("c", "message"), ""])
    request = rng.choice([{"tools": k3.TOOLS}, {"tools": k3.TOOLS, "tool_choice": "none"}, {}])
    return {"request": request, "prompt_ids": [], "ids": tokenizer.encode(out, add_special_tokens=False).ids,
            "finish": "stop"}


def test_kimi_k3_passages_route_bodies_with_stray_marker_characters(checked_parse, tmp_path):
    """Reasoning and response bodies holding "<", "|", "<|" and partial
    markers, in random chunkings, for the pairs with a Kimi K3 stage: every
    chunk a passage routes is checked against the parser, each folded stream
    against the same derenderer's non-streaming answer."""

    from tokenizers import Tokenizer

    rng = random.Random("kimi_k3 bodies")
    pairs = ["kimi_k3+kimi_k3", "kimi_k3+-", "-+kimi_k3", "deepseek_r1+kimi_k3", "kimi_k3+hermes"]
    ders = ours_family.derenderers("kimi_k3", pairs, tmp_path)
    tokenizer = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for _ in range(40):
        case = _k3_case(rng, tokenizer)
        for _ in range(CHUNKINGS):
            chunked = _random_chunks(case, rng)
            for key, der in ders.items():
                got = ours_family.ours(der, chunked)
                assert got["stream"] == got["whole"], (key, chunked)
    assert checked_parse["reasoning"] > 100 and checked_parse["content"] > 100, checked_parse


@pytest.mark.parametrize("family", ["ripple", "gemma4", "minimax_m2", "minimax_m3"])
def test_a_lexers_held_suffix_takes_the_fast_path(family, checked_parse, tmp_path):
    """Not vacuous: chunks that leave an engine lexer holding a marker's first
    characters, come after one, or hold an inert terminal are routed by
    passage (and checked)."""
    meta, cases = ours_family.load(HERE / "data" / "parsers" / "families" / f"{family}.jsonl.gz")
    ders = ours_family.derenderers(family, meta["pairs"], tmp_path)
    for case in cases[:CASES_PER_FAMILY]:
        for der in ders.values():
            ours_family.ours(der, case)
    assert checked_parse["scanned"] > 10, checked_parse


OTHER_FAMILIES = [p.name.split(".")[0] for p in FIXTURES if p.name.split(".")[0] not in LATER_PASSAGES]


@pytest.mark.parametrize("family", OTHER_FAMILIES)
def test_every_family_routes_one_random_chunking_as_the_parser_would(family, checked_parse, tmp_path):
    """Held suffixes and inert terminals reach every engine family (and any
    stage after one): its first cases in one random chunking, each routed
    chunk checked against the parser, the folded stream against the answer."""

    rng = random.Random(family)
    meta, cases = ours_family.load(HERE / "data" / "parsers" / "families" / f"{family}.jsonl.gz")
    ders = ours_family.derenderers(family, meta["pairs"], tmp_path)
    for case in cases[:CASES_PER_FAMILY]:
        chunked = _random_chunks(case, rng)
        for key, der in ders.items():
            assert ours_family.compare(chunked, key, ours_family.ours(der, chunked)) == [], (key, chunked["chunks"])


@pytest.mark.parametrize(("family", "pair"), [
    ("phi4_mini_json", "-+phi4_mini_json"),
    ("hunyuan_a13b", "hunyuan_a13b+hunyuan_a13b"),
    ("olmo3", "olmo3+hermes"),
    ("olmo3_tools", "olmo3+olmo3"),
    ("muse", "muse+muse"),
    ("minicpm5", "-+minicpm5"),
    ("granite_reasoning", "granite+granite"),
    ("k2_horizon", "k2_horizon+k2_horizon"),
    ("ernie45", "deepseek_r1+ernie45"),
])
def test_a_stage_holding_everything_grows_its_buffer_in_the_state(family, pair, checked_parse, tmp_path):
    """Not vacuous: these families' held chunks are appended to the state without resuming the parser."""
    _, cases = ours_family.load(HERE / "data" / "parsers" / "families" / f"{family}.jsonl.gz")
    der = ours_family.derenderers(family, [pair], tmp_path)[pair]
    for case in cases[:CASES_PER_FAMILY]:
        ours_family.ours(der, case)
    assert checked_parse["grown"] > 20, checked_parse



# Plain answer text for Cohere's early streaming: paragraphs, whitespace held
# between chunks (a run past what the state carries as text), whitespace only
# melody strips (U+3000) or only Python does (U+001C), CJK and emoji; then
# "<"s that begin no marker (the rest of the block is held, not streamed).
COHERE_LONG = ("The sky is blue. " * 8 + "\n\n" + "A line with trailing spaces   \n" * 3 + " " * 100
               + "after a long run\t\u3000and a \x1c separator " + "東京 🚀 " * 10
               + "if a <= b and x<y, <b>bold</b> <|not a marker|> <" + " held text" * 8 + " end.  ")
COHERE_LONG_OUTPUTS = [
    ("cohere_command3+cohere_command3", f"<|START_RESPONSE|>{COHERE_LONG}<|END_RESPONSE|>"),
    ("cohere_command4+-", f"{COHERE_LONG}<|END_THINKING|><|START_RESPONSE|>{COHERE_LONG}<|END_RESPONSE|>"),
]


def cohere_case(tmp_path: Path, text: str, one_token: bool) -> dict:
    """A stream of `text` (the family tokenizer's ids) in 1-token or random chunks."""
    from tokenizers import Tokenizer

    ids = Tokenizer.from_file(str(tmp_path / "tokenizer.json")).encode(text, add_special_tokens=False).ids
    case = {"request": {}, "prompt_ids": [], "ids": ids, "finish": "stop", "chunks": [1] * len(ids)}
    return case if one_token else _random_chunks(case, random.Random(len(text)))


@pytest.mark.parametrize(("pair", "text"), COHERE_LONG_OUTPUTS, ids=[p for p, _ in COHERE_LONG_OUTPUTS])
def test_cohere_sends_what_it_grows_by(pair, text, checked_parse, tmp_path):
    """Cohere's answer (and Command 4's reasoning), streamed early while held,
    is appended to the state and sent without resuming the stage: each such
    chunk checked against the stage itself (checked_parse), and not vacuous."""
    der = ours_family.derenderers("cohere", [pair], tmp_path)[pair]
    for one_token in (True, False):
        got = ours_family.ours(der, cohere_case(tmp_path, text, one_token))
        assert got["stream"] == got["whole"] and got["whole"]["content"].startswith("The sky is blue."), got
    assert checked_parse["grown and sent"] > 100, checked_parse
