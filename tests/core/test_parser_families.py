"""Engine parser families against vLLM 0.34, case by case, end to end.

The fixtures (tests/data/parsers/families/<family>.jsonl.gz) hold random and
handwritten outputs of each family, well-formed and malformed, with vLLM
0.34's answer per parser pair as its render server computes it
(tests/golden/parsers/vllm_family.py, in process).  Each case goes through
our Derenderer with the family's test tokenizer: the non-streaming answer
and the stream in the recorded 1-4-token chunks, folded, must both equal
vLLM's non-streaming answer (reasoning, content, tool call names and
arguments, finish_reason).  Where vLLM's own stream differs from its
non-streaming answer, ours follows the non-streaming one (docs/parsers.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parents[1]
sys.path.append(str(HERE / "golden" / "parsers"))

import ours_family  # noqa: E402

FIXTURES = sorted((HERE / "data" / "parsers" / "families").glob("*.jsonl.gz"))
LOADED = {path.name.split(".")[0]: ours_family.load(path) for path in FIXTURES}
CASES = [(family, i) for family, (_, cases) in LOADED.items() for i in range(len(cases))]


@pytest.fixture(scope="module")
def derenderers(tmp_path_factory):
    cache: dict = {}

    def get(family: str) -> dict:
        if family not in cache:
            meta = LOADED[family][0]
            cache[family] = ours_family.derenderers(family, meta["pairs"], tmp_path_factory.mktemp(family))
        return cache[family]

    return get


def test_every_family_has_fixtures_from_vllm_034():
    assert LOADED, "no family fixtures"
    for family, (meta, cases) in LOADED.items():
        assert meta["vllm"] == "0.34.0" and meta["family"] == family
        assert len(cases) >= 200, f"{family}: keep the corpus from silently shrinking"


@pytest.mark.parametrize(("family", "i"), CASES, ids=[f"{f}-{i}" for f, i in CASES])
def test_case_matches_vllm_non_streaming(family, i, derenderers):
    case = LOADED[family][1][i]
    for key, der in derenderers(family).items():
        got = ours_family.ours(der, case)
        assert ours_family.compare(case, key, got) == [], (key, case["results"][key]["whole"], got)
