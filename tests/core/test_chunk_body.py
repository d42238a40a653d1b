"""ChunkDecoder: a chunk body decodes as body.py's full decode does, options
remembered or not, and every bad body fails with the full decode's error."""

from __future__ import annotations

import json

import msgspec
import pytest

from derender_queue.contract.stream_requests import DerenderChatStreamRequest, DerenderCompletionStreamRequest
from derender_queue.core.body import decode_body
from derender_queue.core.chunk_body import ChunkDecoder
from derender_queue.core.stream_state import options_bytes
from derender_queue.errors import DerenderError

TOOL = {"type": "function", "function": {"name": "look_up", "parameters": {"type": "object"}}}
GEN = {"request_id": "r", "choices": [{"index": 0, "token_ids": [5, 6]}]}
LOGPROBS = {"content": [{"token": "token_id:7", "logprob": -0.5,
                         "top_logprobs": [{"token": "token_id:8", "logprob": -1}]}]}


def body(options_field: str, options: object = ..., **more: object) -> bytes:
    fields: dict = {"stream": True, "generate_chunk": GEN, **more}
    if options is not ...:
        fields[options_field] = options
    return json.dumps(fields).encode()


CHAT = [
    body("chat_request"),
    body("chat_request", None),
    body("chat_request", {}),
    body("chat_request", {"logprobs": True, "top_logprobs": 5}),
    body("chat_request", {"tools": [TOOL], "tool_choice": "auto"}),
    body("chat_request", {"tools": [TOOL]}, prompt_token_ids=[1, 2]),
    body("chat_request", {"tools": [TOOL]}, generate_chunk={"request_id": "r", "choices": [
        {"index": 0, "token_ids": [7], "logprobs": LOGPROBS}]}),  # pre-0.33 ids, filled in
    body("chat_request", {"top_logprobs": -1.5}),  # bad options
    body("chat_request", {"tools": "no"}),
    body("chat_request", {"logprobs": True}, prompt_token_ids="no"),  # bad elsewhere, options fine
    body("chat_request", {}, prompt_token_ids=[1, 2]),  # ids seen with other options
    body("chat_request", {}, prompt_token_ids=[1, -2]),  # bad ids, options seen
    body("chat_request", {}, prompt_token_ids=[1, 2.5]),
    body("chat_request", {}, prompt_token_ids=[[1], 2]),
    body("chat_request", {}, prompt_token_ids=None),
    body("chat_request", {"logprobs": True}, stream_state={"opaque": 5}),
    body("chat_request", {"logprobs": True}, unknown_field=1),
    body("chat_request", [1]),
    body("chat_request", {}, generate_chunk=None),
    b'{"stream": true, "chat_request": {}, "generate_chunk": {"choices": [{"index": 0, "token_ids": [1], '
    b'"logprobs": {"content": [{"token_id": 1, "logprob": -Infinity}]}}]}}',  # the second pass
    b'{"stream": true, "chat_request": {"logprobs": true}, "generate_chunk": ',  # cut short
]
COMPLETION = [
    body("completion_request"),
    body("completion_request", {"logprobs": 2, "echo": False}),
    body("completion_request", {"logprobs": -3}),
    body("completion_request", {"logprobs": 2}, prompt_tokens="x"),
    body("completion_request", {"logprobs": 2}, prompt_token_ids=[4, 5, 6]),
    body("completion_request", {"logprobs": 2}, prompt_token_ids=["4"]),
    body("completion_request", {"logprobs": 2}, generate_chunk={"request_id": "r", "choices": [
        {"index": 0, "token_ids": [7], "logprobs": LOGPROBS}]}),
]


def outcome(decode, data: bytes) -> tuple:
    """What a decode gives: the request as builtins and its options key, or its error."""
    try:
        request, key = decode(data)
    except DerenderError as exc:
        return ("error", exc.status, exc.message, exc.param)
    return ("ok", json.loads(msgspec.json.encode(request)), key)


def full(kind: type, options_field: str):
    def decode(data: bytes) -> tuple:
        request = decode_body(data, kind)
        return request, options_bytes(getattr(request, options_field))
    return decode


@pytest.mark.parametrize("endpoint, bodies, kind, field", [
    ("chat", CHAT, DerenderChatStreamRequest, "chat_request"),
    ("completion", COMPLETION, DerenderCompletionStreamRequest, "completion_request"),
])
def test_chunks_decode_as_the_full_decode_cold_and_warm(endpoint, bodies, kind, field) -> None:
    decoder = ChunkDecoder()
    decode = getattr(decoder, endpoint)
    expected = [outcome(full(kind, field), data) for data in bodies]
    assert {e[0] for e in expected} == {"ok", "error"}
    for _ in range(3):  # cold, then with every options value already seen, then again
        assert [outcome(decode, data) for data in bodies] == expected


def test_seen_options_are_decoded_once_and_shared() -> None:
    decoder = ChunkDecoder()
    first, key = decoder.chat(body("chat_request", {"tools": [TOOL]}))
    second, again = decoder.chat(body("chat_request", {"tools": [TOOL]}, prompt_token_ids=[3]))
    assert second.chat_request is first.chat_request and again is key
    other, _ = decoder.chat(body("chat_request", {"tools": [TOOL], "tool_choice": "none"}))
    assert other.chat_request is not first.chat_request
    assert other.chat_request.tool_choice == "none" and second.chat_request.tool_choice != "none"


def test_seen_prompt_ids_are_decoded_once_and_shared() -> None:
    """With a parser every chunk repeats the whole prompt: its ids are
    decoded on the first chunk and reused, whatever the options."""
    decoder = ChunkDecoder()
    ids = list(range(1000, 3000))
    first, _ = decoder.chat(body("chat_request", {}, prompt_token_ids=ids))  # all new: the full decode
    second, _ = decoder.chat(body("chat_request", {}, prompt_token_ids=ids, stream_state=None))
    assert first.prompt_token_ids == ids and second.prompt_token_ids is first.prompt_token_ids
    decoder.chat(body("chat_request", {"tools": [TOOL]}))
    third, _ = decoder.chat(body("chat_request", {"tools": [TOOL]}, prompt_token_ids=ids))  # options seen apart
    assert third.prompt_token_ids is first.prompt_token_ids
    other, _ = decoder.chat(body("chat_request", {}, prompt_token_ids=ids[:-1]))  # new ids, options seen
    fourth, _ = decoder.chat(body("chat_request", {"tools": [TOOL]}, prompt_token_ids=ids[:-1]))
    assert other.prompt_token_ids == ids[:-1] and fourth.prompt_token_ids is other.prompt_token_ids


def test_a_bad_options_value_is_never_remembered() -> None:
    decoder = ChunkDecoder()
    bad = body("chat_request", {"top_logprobs": "five"})
    for _ in range(2):
        with pytest.raises(DerenderError) as info:
            decoder.chat(bad)
        assert info.value.param == "chat_request.top_logprobs"


@pytest.mark.parametrize("bound, value, most", [("_KEPT", 3, 3), ("_KEPT_BYTES", 100, 2)])
def test_the_memo_forgets_past_its_bounds(monkeypatch, bound, value, most) -> None:
    """Each options value here is 38 bytes of JSON: a bound of 3 entries keeps
    3, one of 100 bytes keeps 2."""
    monkeypatch.setattr(f"derender_queue.core.chunk_body.{bound}", value)
    decoder = ChunkDecoder()
    sizes = []
    for n in range(10):
        request, key = decoder.chat(body("chat_request", {"top_logprobs": n, "user": "someone"}))
        assert request.chat_request.top_logprobs == n and key == options_bytes(request.chat_request)
        kept = decoder._chat.options.known.keys() - {b"", b"null"}
        assert decoder._chat.options.size == sum(map(len, kept))
        sizes.append(len(kept))
    assert max(sizes) == most


@pytest.mark.parametrize("bound, value, most", [("_KEPT", 3, 3), ("_KEPT_BYTES", 100, 2)])
def test_the_prompt_memo_forgets_past_its_bounds(monkeypatch, bound, value, most) -> None:
    """Each prompt here is 38 or 39 bytes of JSON (ids 10000-10009)."""
    monkeypatch.setattr(f"derender_queue.core.chunk_body.{bound}", value)
    decoder = ChunkDecoder()
    sizes = []
    for n in range(10):
        ids = [10000 + n, 10001, 10002, 10003, 10004, 10005]
        request, _ = decoder.chat(body("chat_request", {}, prompt_token_ids=ids))
        assert request.prompt_token_ids == ids
        kept = decoder._chat.prompts.known.keys() - {b"", b"null"}
        assert decoder._chat.prompts.size == sum(map(len, kept))
        sizes.append(len(kept))
    assert max(sizes) == most
