"""Random streams for the differential run (differential.py --streams): one
choice's output cut into 1-4-token generate chunks, each side carrying its
own `stream_state`, beside the same output as one non-streaming body.

Plain families reuse differential.py's random bodies (stop strings,
min_tokens, logprobs, specials, split characters ...). The parsed families
(`r1_hermes`, `v4`) build outputs with structure: think blocks (the added
tokens or spelled with ordinary ones), tool calls well-formed, malformed
and cut short (hermes JSON, DSML invokes with `string="true"/"false"`
values), text around them; their requests pick tools, tool_choice,
parallel_tool_calls, include_reasoning and thinking at random.

Imports only the stdlib, `tokenizers` and the recorders beside it.
"""

from __future__ import annotations

import json
import random

import differential as D
import record_vllm as R

PARSED = D.PARSED
VALUES = ["Paris", "杭州", "best café 🍵", 'say "hi"\\n', "  spaced  ", "", "a<b>c", "3", "-1e3", "true",
          '{"k": [1, 2]}', "null", "多行\n文本"]


def _think(rng: random.Random, fam: D.Family, text: str) -> list[int]:
    spelled = rng.random() < 0.25
    ids = R.enc_parts("<", "think", ">") if spelled else [R.THINK]
    if rng.random() < 0.2:
        ids = []  # no opening marker: reasoning until </think>
    ids += fam.enc(text)
    if rng.random() < 0.85:
        ids += R.enc_parts("</", "think", ">") if spelled else [R.END_THINK]
    return ids


def _hermes_call(rng: random.Random) -> str:
    args = {"location": rng.choice(VALUES), "days": rng.randint(0, 9)}
    if rng.random() < 0.2:
        return R.hermes("get_weather", None, raw_args='{"name": "get_weather", "arguments": {"location": ')
    if rng.random() < 0.15:
        return R.hermes("get_weather", args, raw_args=json.dumps({"name": "get_weather", "arguments":
                                                                  json.dumps(args, ensure_ascii=False)}))
    return R.hermes(rng.choice(["get_weather", "search", "unknown_fn"]), args)


def _dsml_call(rng: random.Random) -> str:
    params = []
    for name in rng.sample(["location", "days", "unit", "query", "limit", "arguments"], rng.randint(0, 3)):
        kind = rng.choice(["true", "true", "false", None])
        value = rng.choice(VALUES) if kind != "false" else rng.choice(["3", "-1e3", "true", '{"a": 1}', "three"])
        params.append((name, kind, value))
    text = R.dsml_invoke(rng.choice(["get_weather", "search", "unknown_fn"]), params)
    if rng.random() < 0.15:
        text = text[: rng.randrange(1, len(text))]  # cut short
    return text


def parsed_ids(rng: random.Random, fam: D.Family, family: str) -> list[int]:
    """An output with think blocks, text and tool calls in random order."""
    ids: list[int] = []
    for _ in range(rng.randint(1, 4)):
        r = rng.random()
        if r < 0.3:
            ids += _think(rng, fam, rng.choice(D.SNIPPETS) + " " + rng.choice(D.SNIPPETS))
        elif r < 0.55:
            ids += fam.enc(rng.choice(D.SNIPPETS))
        elif r < 0.85:
            if family == "r1_hermes":
                ids += R.enc(_hermes_call(rng))
            else:
                calls = "".join(_dsml_call(rng) for _ in range(rng.randint(1, 2)))
                ids += R.enc(f"<{R.DSML}tool_calls>\n{calls}</{R.DSML}tool_calls>"
                             if rng.random() < 0.8 else calls)
        else:
            ids += D.random_ids(rng, fam)[:6]
    return ids[:160] or fam.enc("x")


def parsed_request(rng: random.Random) -> dict:
    req: dict = {"messages": [{"role": "user", "content": "hi"}]}
    if rng.random() < 0.75:
        req["tools"] = R.TOOLS if rng.random() < 0.9 else []
        r = rng.random()
        if r < 0.15:
            req["tool_choice"] = "none"
        elif r < 0.25:
            req["tool_choice"] = "required"
        elif r < 0.32 and req["tools"]:
            req["tool_choice"] = R.NAMED_WEATHER
        elif r < 0.5:
            req["tool_choice"] = "auto"
    if rng.random() < 0.15:
        req["parallel_tool_calls"] = False
    if rng.random() < 0.1:
        req["include_reasoning"] = False
    if rng.random() < 0.2:
        req["chat_template_kwargs"] = {"thinking": rng.random() < 0.5}
    if rng.random() < 0.2:
        req.update(logprobs=True, top_logprobs=rng.randint(0, 3))
    if rng.random() < 0.15:
        req["return_token_ids"] = True
    return req


def cut(rng: random.Random, n: int) -> list[int]:
    """Chunk boundaries: 1-4 tokens a chunk."""
    out, at = [], 0
    while at < n:
        at += rng.randint(1, 4)
        out.append(min(at, n))
    return out


def stream_case(family: str, fam: D.Family, seed: int, i: int) -> dict:
    """One stream: `base` (fields sent with every chunk), `chunks`, and
    `whole` (the same output as one non-streaming body)."""
    rng = random.Random(f"{seed}:{family}:stream:{i}")
    endpoint = "chat" if family in PARSED or rng.random() < 0.55 else "completion"
    if family in PARSED:
        ids = parsed_ids(rng, fam, family)
        if rng.random() < 0.6:
            ids.append(fam.eos)
        options = parsed_request(rng)
        choice: dict = {"index": 0, "token_ids": ids}
        if options.get("logprobs"):
            choice["logprobs"] = D.logprobs(rng, fam, ids, options["top_logprobs"])
        r = rng.random()
        choice["finish_reason"] = "stop" if r < 0.75 else "length" if r < 0.9 else None
        prompt = fam.enc(rng.choice(D.SNIPPETS))
        if rng.random() < 0.15:  # a prompt that opens or closes reasoning
            prompt += [R.THINK] if rng.random() < 0.5 else [R.THINK, *fam.enc("old"), R.END_THINK]
        base = {"chat_request": options, "prompt_token_ids": prompt}
    else:
        body = D.body(rng, fam, endpoint, i)
        gen = body.pop("generate_response", None) or body.pop("generate_responses")[0]
        choice = gen["choices"][0]
        if not choice.get("token_ids"):
            choice["token_ids"] = fam.enc("x")
            choice.pop("logprobs", None)
        choice["index"] = 0
        base = body
        if gen.get("prompt_token_ids") is not None:
            base["prompt_token_ids"] = gen["prompt_token_ids"]
    if rng.random() < 0.15:
        choice["stop_reason"] = rng.choice([fam.eos, "zz", None])
    chunks = _chunks(rng, choice, f"ds-{family}-{seed}-{i}")
    gen = {"request_id": f"ds-{family}-{seed}-{i}", "choices": [choice]}
    whole = dict(base)
    if endpoint == "chat":
        whole["generate_response"] = gen
    else:
        whole["generate_responses"] = [gen]
        if "prompt_token_ids" in base:
            whole["prompt_token_ids"] = [base["prompt_token_ids"]]
    return {"name": f"{family}_stream_{seed}_{i}", "family": family, "endpoint": endpoint,
            "path": R.CHAT if endpoint == "chat" else R.COMP, "base": base, "chunks": chunks, "whole": whole}


def _chunks(rng: random.Random, choice: dict, rid: str) -> list[dict]:
    ids = choice["token_ids"]
    content = (choice.get("logprobs") or {}).get("content")
    out, start = [], 0
    for end in cut(rng, len(ids)):
        part: dict = {"index": 0, "token_ids": ids[start:end], "finish_reason": None}
        if content is not None:
            part["logprobs"] = {"content": content[start:end]}
        out.append({"request_id": rid, "choices": [part]})
        start = end
    last = out[-1]["choices"][0]
    if rng.random() < 0.1:  # the finish on a token-less chunk of its own
        last = {"index": 0, "token_ids": [], "finish_reason": None}
        out.append({"request_id": rid, "choices": [last]})
    last["finish_reason"] = choice.get("finish_reason", "stop")
    if "stop_reason" in choice:
        last["stop_reason"] = choice["stop_reason"]
    if rng.random() < 0.2:
        n = len(ids)
        out.append({"request_id": rid, "choices": [],
                    "usage": {"prompt_tokens": 7, "completion_tokens": n, "total_tokens": 7 + n}})
    return out


def play_stream(send, case: dict, served: str) -> dict:
    """vLLM's answers: each chunk carrying vLLM's own state (stopping at the
    first refusal), and the whole body. `send(path, body) -> (status, json)`."""
    state, responses = None, []
    for gen in case["chunks"]:
        body = {"stream": True, "model": served, **case["base"], "generate_chunk": gen}
        if state is not None:
            body["stream_state"] = state
        status, data = send(case["path"], body)
        if status != 200:
            responses.append({"status": status, "body": data})
            break
        # vLLM's parsed states carry every output id: kept out of the record (each side carries its own).
        state = data.pop("stream_state")
        responses.append({"status": status, "body": {**data, "stream_state": None}})
    status, data = send(case["path"], {"model": served, **case["whole"]})
    return {**case, "responses": responses, "whole_response": {"status": status, "body": data}}
