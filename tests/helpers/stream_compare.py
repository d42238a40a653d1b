"""Our streaming derender beside vLLM's, chunk by chunk, on the differential
streams (tools/golden/differential_streams.py), each side carrying its own
`stream_state`, against a model of the recording release's compat profile.

A stream is equal when every answer equals vLLM's after the non-streaming
DIFFERENCES (differential_compare.py: `created`, `bytes`, `text_offset`,
tool call ids). Otherwise it must fall in one of CLASSES, each recognised by
its own check, and then our stream, folded, must still equal the
non-streaming answer (ours, which must equal vLLM's after DIFFERENCES).
Anything else is an undocumented difference. docs/compatibility.md lists
the classes with the same names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from derender_queue.core import Derenderer
from derender_queue.errors import DerenderError
from tests.helpers import differential_compare as DC

STOP_REFUSED = "stop strings are not supported by streaming derender"
CLASSES = {
    "stop_strings": "vLLM refuses a stream whose request has stop strings (400); ours serves it, holding back "
                    "only text a stop string may still cut, and folds to the non-streaming answer",
    "tool_call_fragments": "the same tool calls, split otherwise: ours sends a call's id and name first, then "
                           "its arguments in pieces",
    "tool_call_arguments": "vLLM's streamed arguments, assembled, differ from its own non-streaming answer; "
                           "ours equal that answer",
    "tool_calls": "vLLM's stream makes other tool calls than its own answer (a call its answer returns as "
                  "text, invalid or cut short; a call its answer keeps in reasoning; a name with text its "
                  "answer drops); ours make the answer's",
    "parsed_text": "vLLM's streamed reasoning/content differ from its own non-streaming answer (a think "
                   "marker spelled with ordinary tokens, or sharing a chunk with text; a prompt that opened "
                   "or closed reasoning; special tokens' text; 0.33 stopping reasoning at the first "
                   "`</think>` without a tool parser); ours follow the non-streaming answer",
    "parsed_timing": "the same parsed fields as vLLM's stream, released at other chunks",
    "held_stop_token": "ours holds a chunk's trailing EOS or stop token until the next chunk says whether it "
                       "is dropped (so the stream folds to the non-streaming answer); vLLM's sends its text",
    "logprobs_late": "a completion logprob entry whose token starts past the text released so far (after a "
                     "character still split across tokens) comes with the chunk that releases that text, so "
                     "its `text_offset` is final; vLLM's comes with its token",
    "unfinished": "a stream whose last chunk has no finish_reason is not over: ours still holds what only the "
                  "finish decides (a trailing stop token, text a parser decides at the end); what it sent is "
                  "a prefix of the answer",
}


def run_ours(derenderer: Derenderer, s: dict, served: str) -> list[dict]:
    """Each chunk carrying our state, stopping at the first refusal."""
    out: list[dict] = []
    state = None
    for gen in s["chunks"]:
        body = {"stream": True, "model": served, **s["base"], "generate_chunk": gen}
        if state is not None:
            body["stream_state"] = state
        try:
            data = json.loads(derenderer.derender(s["endpoint"], json.dumps(body).encode()).body)
        except DerenderError as exc:
            out.append({"status": exc.status, "body": json.loads(exc.body())})
            break
        out.append({"status": 200, "body": data})
        state = data["stream_state"]
    return out


def fold(endpoint: str, answers: list[dict]) -> dict[str, Any]:
    """What a client assembles from a stream's chunks."""
    out: dict[str, Any] = {"reasoning": None, "content": None, "text": "", "calls": {}, "logprobs": None,
                           "finish_reason": None, "stop_reason": None, "token_ids": None}
    for answer in answers:
        for choice in answer["body"]["chunk"]["choices"]:
            if endpoint == "chat":
                delta = choice["delta"]
                for name in ("reasoning", "content"):
                    if delta.get(name) is not None:
                        out[name] = (out[name] or "") + delta[name]
                for tc in delta.get("tool_calls") or ():
                    call = out["calls"].setdefault(tc["index"], ["", ""])
                    function = tc.get("function") or {}
                    call[0] += function.get("name") or ""
                    call[1] += function.get("arguments") or ""
                lp = (choice.get("logprobs") or {}).get("content")
                if lp is not None:
                    out["logprobs"] = (out["logprobs"] or []) + lp
            else:
                out["text"] += choice["text"]
                lp = choice.get("logprobs")
                if lp is not None:
                    merged = out["logprobs"] or {k: [] for k in lp}
                    out["logprobs"] = {k: merged[k] + lp[k] for k in lp}
            if choice.get("token_ids") is not None:
                out["token_ids"] = (out["token_ids"] or []) + choice["token_ids"]
            out["finish_reason"] = choice["finish_reason"]
            out["stop_reason"] = choice["stop_reason"]
    out["calls"] = [tuple(out["calls"][i]) for i in sorted(out["calls"])]
    return out


def expected(endpoint: str, response: dict) -> dict[str, Any]:
    """The same fields from a non-streaming answer."""
    choice = response["choices"][0]
    out: dict[str, Any] = {"reasoning": None, "content": None, "text": "", "calls": [], "logprobs": None,
                           "finish_reason": choice["finish_reason"], "stop_reason": choice["stop_reason"],
                           "token_ids": choice["token_ids"]}
    if endpoint == "chat":
        message = choice["message"]
        out["reasoning"], out["content"] = message.get("reasoning"), message["content"]
        out["calls"] = [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or ()]
        out["logprobs"] = (choice["logprobs"] or {}).get("content")
    else:
        out["text"], out["logprobs"] = choice["text"], choice["logprobs"]
    return out


def _loose(f: dict) -> dict:
    """A fold without what chunking may spell otherwise: content null where
    the whole answer has "" (a chunk without text carries null)."""
    f = dict(f)
    if f["content"] == "":
        f["content"] = None
    if f["reasoning"] == "":
        f["reasoning"] = None
    return f


def _normal_chunks(s: dict, ours: list[dict], theirs: list[dict], ref: list[bytes]) -> None:
    """The non-streaming DIFFERENCES, chunk by chunk: `created`, `bytes`
    (ours the reference's), tool call ids (ours `chatcmpl-tool-<hex>`)."""
    for mine, vllm in zip(ours, theirs, strict=False):
        if mine["status"] != 200 or vllm["status"] != 200:
            continue
        a, b = mine["body"], vllm["body"]
        a["chunk"]["created"] = b["chunk"]["created"]
        a["stream_state"] = b["stream_state"] = "(each side's own)"
        for ca, cb in zip(a["chunk"]["choices"], b["chunk"]["choices"], strict=False):
            _normal_logprobs(ca.get("logprobs"), cb.get("logprobs"), ref)
            for ta in (ca.get("delta") or {}).get("tool_calls") or ():
                if ta.get("id") is not None:
                    assert DC.TOOL_ID.match(ta["id"]), ta
                    ta["id"] = "chatcmpl-tool-(random)"
            for tb in (cb.get("delta") or {}).get("tool_calls") or ():
                if tb.get("id") is not None:
                    tb["id"] = "chatcmpl-tool-(random)"


def _normal_logprobs(a: dict | None, b: dict | None, ref: list[bytes]) -> None:
    if not a or not b:
        return
    if "content" in a:
        for ea, eb in zip(a["content"] or (), b.get("content") or (), strict=False):
            for xa, xb in zip([ea, *ea["top_logprobs"]], [eb, *eb["top_logprobs"]], strict=False):
                if xa["bytes"] is not None and not xa["token"].startswith("token_id:"):
                    xa["bytes"] = xb["bytes"]
    elif "text_offset" in a and b.get("text_offset") is not None:
        a["text_offset"] = b["text_offset"]


def classify(derenderer: Derenderer, s: dict, served: str) -> str | None:
    """None (equal), a CLASSES name, or `undocumented: why`."""
    endpoint = s["endpoint"]
    whole_case = {"name": s["name"], "path": s["path"], "request": {"model": served, **s["whole"]},
                  "status": s["whole_response"]["status"], "response": s["whole_response"]["body"]}
    why = DC.compare(derenderer, whole_case)
    if why is not None:
        return f"undocumented: non-streaming: {why}"
    ours = run_ours(derenderer, s, served)
    theirs = s["responses"]
    status, whole = DC.run(derenderer, whole_case)
    want = json.loads(json.dumps(_loose(expected(endpoint, whole)))) if status == 200 else None
    refused = theirs[-1]["status"] != 200
    # Ours, folded, as the client assembles it (our own `text_offset`s included).
    mine = json.loads(json.dumps(_loose(fold(endpoint, ours)))) if ours[-1]["status"] == 200 else None
    unfinished = [c["choices"][0] for c in s["chunks"] if c["choices"]][-1]["finish_reason"] is None
    if refused and STOP_REFUSED in theirs[-1]["body"]["error"]["message"]:
        if want is None or mine is None:
            return "stop_strings" if ours[-1]["status"] == theirs[-1]["status"] else "undocumented: stop + error"
        if mine == want or (unfinished and _prefix_of(mine, want)):
            return "stop_strings"
        return f"undocumented: stop strings fold {mine} != {want}"[:600]
    if refused or ours[-1]["status"] != 200:
        a, b = ours[-1], theirs[-1]
        if len(ours) == len(theirs) and a["status"] == b["status"] and \
                a["body"]["error"]["message"] == b["body"]["error"]["message"]:
            return None
        return f"undocumented: refusals differ: ours {a['status']} {a['body']} vLLM {b['status']} {b['body']}"[:600]
    _normal_chunks(s, ours, theirs, DC.reference(derenderer))
    if [o["body"] for o in ours] == [t["body"] for t in theirs]:
        return None
    if unfinished:
        return "unfinished" if _prefix_of(mine, want) else f"undocumented: unfinished {mine} vs {want}"[:600]
    if mine != want:
        return f"undocumented: our stream folds to {mine}, the answer is {want}"[:600]
    # vLLM's stream against its own answer (which ours equals but for DIFFERENCES).
    want = _loose(expected(endpoint, s["whole_response"]["body"]))
    vllm = _loose(fold(endpoint, theirs))
    parsed = s["family"] in ("r1_hermes", "v4")
    if not parsed and vllm != want and _held_id(s, derenderer):
        return "held_stop_token"  # vLLM sent a stop token's text that its answer drops
    if vllm["calls"] != want["calls"]:
        same_names = [n for n, _ in vllm["calls"]] == [n for n, _ in want["calls"]]
        return "tool_call_arguments" if same_names else "tool_calls"
    if (vllm["reasoning"], vllm["content"]) != (want["reasoning"], want["content"]):
        return "parsed_text"
    if vllm != want:
        return f"undocumented: vLLM's stream folds to {vllm}, its answer is {want}"[:600]
    if _calls_split(ours) != _calls_split(theirs):
        return "tool_call_fragments"
    if endpoint == "completion" and _without_logprobs(ours) == _without_logprobs(theirs):
        return "logprobs_late"  # the fold (ours) equals the answer: only where entries go differs
    if parsed:
        return "parsed_timing"
    if _held_id(s, derenderer):
        return "held_stop_token"
    return "undocumented: " + "; ".join(DC._diff([o["body"] for o in ours], [t["body"] for t in theirs]))[:600]


def _without_logprobs(answers: list[dict]) -> list:
    return [[{**c, "logprobs": None} for c in a["body"]["chunk"]["choices"]] for a in answers]


def _calls_split(answers: list[dict]) -> list:
    return [[tc for c in a["body"]["chunk"]["choices"] for tc in (c.get("delta") or {}).get("tool_calls") or ()]
            for a in answers]


def _held_id(s: dict, derenderer: Derenderer) -> bool:
    """Does a chunk before the last end in a droppable id (EOS or a stop token)?"""
    model = derenderer.registry.get(None)
    options = s["base"].get("chat_request") or s["base"].get("completion_request") or {}
    if options.get("include_stop_str_in_output"):
        return False
    droppable = set(model.eos.all) | set(options.get("stop_token_ids") or ())
    choices = [c["choices"][0] for c in s["chunks"] if c["choices"]]
    return any(c["token_ids"] and c["token_ids"][-1] in droppable for c in choices[:-1])


def _prefix_of(mine: dict, want: dict) -> bool:
    """Did an unfinished stream send only a prefix of the answer's text and calls?"""
    for key in ("reasoning", "content", "text"):
        if not (want[key] or "").startswith(mine[key] or ""):
            return False
    if len(mine["calls"]) > len(want["calls"]):
        return False
    return all(w[0] == m[0] and w[1].startswith(m[1]) for m, w in zip(mine["calls"], want["calls"], strict=False))


def compare_all(streams: list[dict], llama_dir, release: str,
                names: dict[str, list[str]] | None = None) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Counts per class (and `equal`), and the undocumented streams; `names`
    collects each class's stream names."""
    ders = DC.derenderers(Path(llama_dir), release)
    counts: dict[str, int] = {}
    undocumented = []
    for s in streams:
        served = "llama-fixture" if s["family"] == "llama" else "deepseek-v4"
        verdict = classify(ders[s["family"]], s, served)
        if verdict is not None and verdict.startswith("undocumented"):
            undocumented.append((s["name"], verdict))
            continue
        key = verdict or "equal"
        counts[key] = counts.get(key, 0) + 1
        if names is not None:
            names.setdefault(key, []).append(s["name"])
    return counts, undocumented
