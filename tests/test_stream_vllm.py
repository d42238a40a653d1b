"""Differential tests against vLLM 0.33's own streaming derender
(tests/golden/streams_*.jsonl, recorded by record_vllm_stream.py from the
real render server, carrying vLLM's `stream_state` from chunk to chunk).

* Plain path: every chunk equals vLLM's (after `created`), except the
  deliberate differences the non-streaming goldens already have (`bytes`
  are raw token bytes, completion `text_offset`s are character offsets, and
  so a completion logprob entry may arrive one chunk later, with the text
  it belongs to).
* Every stream: the folded deltas equal vLLM's folded deltas, except where
  DELIBERATE says why not.
* vLLM's state, handed over after any chunk, is continued by us: vLLM's
  deltas so far plus ours fold to the same result.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stream_support import (
    PARSER_CONFIGS,
    derenderers_for,
    fold_chat,
    fold_completion,
    run_stream,
)

from derender_queue.core import Derenderer

GOLDEN = Path(__file__).parent / "golden"
DELIBERATE = {
    "err_chat_stop_strings": "vLLM refuses stop strings in streaming; we hold back what they may cut",
    "err_comp_stop_strings": "as above",
    "r1_hermes_think_3": "vLLM's streaming deepseek_r1 leaves `<think>` in reasoning when it shares a "
                         "chunk with text; its non-streaming parse (ours) drops it",
    "r1_hermes_tool_1": "vLLM streams hermes arguments as partial JSON; we send each call whole when the "
                        "output ends (one invalid call turns all of them into content)",
    "r1_hermes_tool_random": "as above",
    "v4_tool_1": "vLLM streams DSML arguments fragment by fragment; we send them whole when the invoke "
                 "closes (later parameters and schema coercion can rewrite earlier JSON)",
    "v4_tool_random": "as above",
}


def load(config: str) -> list[dict]:
    with open(GOLDEN / f"streams_{config}.jsonl", encoding="utf-8") as f:
        return [json.loads(line) | {"config": config} for line in f]


STREAMS = [s for config in PARSER_CONFIGS for s in load(config)]


@pytest.fixture(scope="module")
def derenderers() -> dict[str, Derenderer]:
    return derenderers_for(PARSER_CONFIGS)


def endpoint(s: dict) -> str:
    return "chat" if s["path"].startswith("/v1/chat") else "completion"


def ours(derenderers, s: dict, state: dict | None = None, start: int = 0) -> list[dict]:
    return run_stream(derenderers[s["config"]], endpoint(s), {**s["base"], "model": "deepseek-v4"},
                      s["chunks"][start:], state=state)


def normal(chunk: dict) -> dict:
    """A chunk without what differs on purpose (see the module docstring)."""
    chunk = json.loads(json.dumps(chunk))
    chunk.pop("created")
    for choice in chunk["choices"]:
        lp = choice["logprobs"]
        if lp and "content" in lp:
            for entry in lp["content"] or ():
                entry.pop("bytes")
                for top in entry["top_logprobs"]:
                    top.pop("bytes")
        elif lp:
            choice["logprobs"] = "completion logprobs (compared folded)"
    return chunk


def folded(s: dict, responses: list[dict]) -> dict:
    out = (fold_chat if endpoint(s) == "chat" else fold_completion)(responses)
    lp = out["logprobs"]
    if isinstance(lp, dict):
        lp.pop("text_offset")
    elif lp:
        out["logprobs"] = normal({"created": 0, "choices": [{"logprobs": {"content": lp}}]})["choices"][0]
    return out


def _vllm_bodies(s: dict) -> list[dict]:
    return [r["body"] for r in s["responses"]]


@pytest.mark.parametrize("s", [s for s in STREAMS if s["config"] == "plain" and s["name"] not in DELIBERATE],
                         ids=lambda s: s["name"])
def test_plain_chunks_equal_vllms(derenderers, s) -> None:
    if s["responses"][-1]["status"] != 200:
        with pytest.raises(Exception) as info:
            ours(derenderers, s)
        assert getattr(info.value, "status", None) == s["responses"][-1]["status"]
        assert info.value.message == s["responses"][-1]["body"]["error"]["message"]
        return
    mine = ours(derenderers, s)
    assert [normal(r["chunk"]) for r in mine] == [normal(b["chunk"]) for b in _vllm_bodies(s)]


FOLDABLE = [s for s in STREAMS if s["responses"][-1]["status"] == 200 and s["name"] not in DELIBERATE]


@pytest.mark.parametrize("s", FOLDABLE, ids=lambda s: s["name"])
def test_folded_streams_equal_vllms(derenderers, s) -> None:
    assert folded(s, ours(derenderers, s)) == folded(s, _vllm_bodies(s))


@pytest.mark.parametrize("s", [s for s in STREAMS if s["name"] in DELIBERATE], ids=lambda s: s["name"])
def test_deliberate_differences(derenderers, s) -> None:
    """What we give instead: the non-streaming result, for any chunking."""
    mine = folded(s, ours(derenderers, s))
    if s["name"].startswith("err_"):
        assert s["responses"][0]["status"] == 400
        text = mine["content"] if endpoint(s) == "chat" else mine["text"]
        assert "fox" not in text and mine["stop_reason"] == "fox"
        return
    one_chunk = {**s, "chunks": [_merged(s["chunks"])]}
    assert mine == folded(s, ours(derenderers, one_chunk))
    theirs = folded(s, _vllm_bodies(s))
    if "think" in s["name"]:
        assert theirs["reasoning"] == "<think>" + mine["reasoning"]
    else:
        assert [name for name, _ in theirs["calls"]] == [name for name, _ in mine["calls"]]


def _merged(chunks: list[dict]) -> dict:
    """All of a stream's tokens as one chunk."""
    choices = [c["choices"][0] for c in chunks if c["choices"]]
    last = choices[-1]
    return {**chunks[0], "choices": [{"index": 0, "token_ids": [t for c in choices for t in c["token_ids"]],
                                      "finish_reason": last["finish_reason"], "stop_reason": last.get("stop_reason")}]}


HANDOFF = [s for s in STREAMS if s["responses"][-1]["status"] == 200 and s["name"] not in DELIBERATE]


@pytest.mark.parametrize("s", HANDOFF, ids=lambda s: s["name"])
def test_continues_from_vllms_state_after_any_chunk(derenderers, s) -> None:
    theirs = _vllm_bodies(s)
    expected = folded(s, theirs)
    for k in range(1, len(s["chunks"])):
        mixed = theirs[:k] + ours(derenderers, s, state=theirs[k - 1]["stream_state"], start=k)
        assert folded(s, mixed) == expected, f"handed over after chunk {k}"
