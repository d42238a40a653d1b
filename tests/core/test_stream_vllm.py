"""Differential tests against vLLM's own streaming derender, each release's
recordings (tests/golden/streams_*.jsonl for 0.33, tests/golden/v0.34/;
record_vllm_stream.py recorded them from the real render servers, carrying
vLLM's `stream_state` from chunk to chunk) against a model of that
release's compat profile.

* Plain path: every chunk equals vLLM's (after `created`), except the
  deliberate differences the non-streaming goldens already have (`bytes`
  are raw token bytes, completion `text_offset`s are character offsets, and
  so a completion logprob entry may arrive one chunk later, with the text
  it belongs to).
* Every stream: the folded deltas equal vLLM's folded deltas, except where
  DELIBERATE says why not.
* vLLM's state (0.33's `prev_tokens`, 0.34's `prev_token_ids`), handed over
  after any chunk, is continued by us: vLLM's deltas so far plus ours fold
  to the same result.
"""

from __future__ import annotations

import json

import pytest

from derender_queue.core import Derenderer
from tests.helpers.golden_files import RELEASES, recorded
from tests.helpers.stream_support import (
    PARSER_CONFIGS,
    derenderers_for,
    fold_chat,
    fold_completion,
    run_stream,
)

CONFIGS = {**PARSER_CONFIGS, "v4_reasoning": {"reasoning_parser": "deepseek_v4"}}
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
    "v4_tool_long_string_1": "as above (0.34 sends a string value's pieces before its parameter closes; ours "
                             "too, in other pieces)",
    "v4_tool_long_string_4": "as above",
    "r1_hermes_tools_empty_1": "vLLM streams hermes arguments as partial JSON (see r1_hermes_tool_1)",
    "v4_tools_empty_1": "as v4_tool_1",
    "v4_reasoning_reopen_1": "0.33's stream stops reasoning at the first `</think>`; its non-streaming parse "
                             "(ours) reopens it at the next `<think>` (0.34's stream does too)",
    "v4_reasoning_reopen_3": "as above",
    "chat_tokens_as_ids_2": "0.33 ignores return_tokens_as_token_ids; ours spells `token_id:N` (0.34 does too)",
    "comp_tokens_as_ids_3": "as above",
}
# Streams that differ from one release only.
RELEASE_ONLY = {"v4_reasoning_reopen_1": ("0.33",), "v4_reasoning_reopen_3": ("0.33",),
                "chat_tokens_as_ids_2": ("0.33",), "comp_tokens_as_ids_3": ("0.33",),
                "r1_hermes_tools_empty_1": ("0.34",), "v4_tools_empty_1": ("0.34",)}


def load(release: str, config: str) -> list[dict]:
    return [s | {"config": config, "release": release} for s in recorded(release, f"streams_{config}")]


STREAMS = [s for release in RELEASES for config in CONFIGS for s in load(release, config)]


def deliberate(s: dict) -> bool:
    return s["name"] in DELIBERATE and s["release"] in RELEASE_ONLY.get(s["name"], RELEASES)


def sid(s: dict) -> str:
    return f"{s['release']}-{s['name']}"


@pytest.fixture(scope="module")
def derenderers() -> dict[tuple[str, str], Derenderer]:
    """(release, config) -> a Derenderer of that compat profile."""
    return {(release, config): d for release in RELEASES
            for config, d in derenderers_for(CONFIGS, compat=release).items()}


def endpoint(s: dict) -> str:
    return "chat" if s["path"].startswith("/v1/chat") else "completion"


def ours(derenderers, s: dict, state: dict | None = None, start: int = 0) -> list[dict]:
    return run_stream(derenderers[s["release"], s["config"]], endpoint(s), {**s["base"], "model": "deepseek-v4"},
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
        elif lp:  # compared folded: an entry may wait for its text (docs/compatibility.md, logprobs_late)
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


@pytest.mark.parametrize("s", [s for s in STREAMS if s["config"] == "plain" and not deliberate(s)], ids=sid)
def test_plain_chunks_equal_vllms(derenderers, s) -> None:
    if s["responses"][-1]["status"] != 200:
        with pytest.raises(Exception) as info:
            ours(derenderers, s)
        assert getattr(info.value, "status", None) == s["responses"][-1]["status"]
        assert info.value.message == s["responses"][-1]["body"]["error"]["message"]
        return
    mine = ours(derenderers, s)
    assert [normal(r["chunk"]) for r in mine] == [normal(b["chunk"]) for b in _vllm_bodies(s)]


FOLDABLE = [s for s in STREAMS if s["responses"][-1]["status"] == 200 and not deliberate(s)]


@pytest.mark.parametrize("s", FOLDABLE, ids=sid)
def test_folded_streams_equal_vllms(derenderers, s) -> None:
    assert folded(s, ours(derenderers, s)) == folded(s, _vllm_bodies(s))


@pytest.mark.parametrize("s", [s for s in STREAMS if deliberate(s)], ids=sid)
def test_deliberate_differences(derenderers, s) -> None:
    """What we give instead: the non-streaming result, for any chunking."""
    mine = folded(s, ours(derenderers, s))
    if "tokens_as_ids" in s["name"]:
        lp = mine["logprobs"]
        tokens = [e["token"] for e in lp["logprobs"]["content"]] if "logprobs" in lp else lp["tokens"]
        assert all(t.startswith("token_id:") for t in tokens), tokens
        return
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


# A parsed stream is handed over exactly where vLLM's stream and ours had sent the same text by
# then: our parser is rebuilt from vLLM's output ids, and sends what it still holds
# (docs/compatibility.md, `parsed_timing`). 0.33's deepseek_v4 without a tool parser sends a
# `<｜DSML｜` prefix at once; ours holds it (a DSML block there ends reasoning): it repeats.
HANDOFF_AT_OTHER_TIMING = {("0.33", "v4_reasoning_dsml_text_2")}
HANDOFF = [s for s in STREAMS if s["responses"][-1]["status"] == 200 and not deliberate(s)
           and (s["release"], s["name"]) not in HANDOFF_AT_OTHER_TIMING]


@pytest.mark.parametrize("s", HANDOFF, ids=sid)
def test_continues_from_vllms_state_after_any_chunk(derenderers, s) -> None:
    theirs = _vllm_bodies(s)
    expected = folded(s, theirs)
    for k in range(1, len(s["chunks"])):
        mixed = theirs[:k] + ours(derenderers, s, state=theirs[k - 1]["stream_state"], start=k)
        assert folded(s, mixed) == expected, f"handed over after chunk {k}"


@pytest.mark.parametrize("s", HANDOFF, ids=sid)
def test_a_stream_vllm_began_gets_vllms_state_as_its_release_writes_it(derenderers, s) -> None:
    """Handed vLLM's state after chunk k-1, we answer chunk k with ours and,
    beside it, vLLM's fields: those vLLM wrote after chunk k (tool call ids
    aside: random on vLLM's side, so only their count)."""
    theirs = _vllm_bodies(s)
    for k in range(1, len(s["chunks"])):
        mine = ours(derenderers, s, state=theirs[k - 1]["stream_state"], start=k)[0]["stream_state"]
        want = dict(theirs[k]["stream_state"])
        assert "opaque" in mine and set(mine) - {"opaque"} == set(want), k
        mine_ids, want_ids = mine.pop("last_tool_call_ids"), want.pop("last_tool_call_ids")
        assert len(mine_ids) == len(want_ids), k
        mine.pop("opaque")
        if _held_stop_token(s, k):
            continue  # ours holds it: vLLM's window has it decoded (docs/compatibility.md, held_stop_token)
        assert mine == want, f"chunk {k}"


def _held_stop_token(s: dict, k: int) -> bool:
    choices = s["chunks"][k]["choices"]
    return bool(choices and choices[0]["token_ids"] and choices[0]["token_ids"][-1] == 1
                and choices[0]["finish_reason"] is None)
