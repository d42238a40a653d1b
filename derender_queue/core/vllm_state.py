"""vLLM's own plain `stream_state` (`DerenderStreamState`), read and written.

A client may hand over the state vLLM's render server returned, to go on
with a stream vLLM began: 0.33 carries its decode window as token strings
(`prev_tokens`), 0.34 as ids (`prev_token_ids`); both are read whatever the
profile. A stream that came in this way is answered with our signed state
and, beside it, vLLM's fields as the profile's release writes them, so the
next chunk may go to vLLM's render server again (a mixed fleet, a rolling
upgrade). vLLM's fields cannot carry what only ours holds (a held stop
token, text a stop string may still cut, a completion logprob's pending
entries, the parser's own state): a stream that goes back to vLLM goes on
with vLLM's rules.
"""

from __future__ import annotations

from derender_queue.compat import Profile
from derender_queue.contract.stream_requests import (
    ChatStreamChoice,
    CompletionStreamChoice,
    StreamStateIn,
    StreamStateOut,
)
from derender_queue.errors import bad_request

from .logprobs import REPAIR_CONTEXT
from .stream_state import ChoiceState
from .stream_text import TextState
from .vocab import Vocab


def speaks_vllm(s: StreamStateIn | None) -> bool:
    """Did the client hand over vLLM's form (alone, or beside ours)?"""
    return s is not None and (s.opaque is None or s.role_sent or bool(s.prev_token_ids or s.prev_tokens
                                                                       or s.output_token_ids))


# vLLM's DerenderStreamState validator bound on its window.
_VLLM_MAX_PREV_TOKENS = 1024


def from_vllm(s: StreamStateIn, vocab: Vocab) -> ChoiceState:
    """Continue a stream vLLM began: its plain-path window (0.34's ids, or
    0.33's token strings mapped back to ids) and counters, checked as its
    validators check them plus what it leaves to chance (offsets inside the
    window, ids inside the vocabulary). Its `text_offset` was a sum of token
    strings; ours count characters from there on."""
    where = "stream_state"
    window = _vllm_window(s, vocab)
    if not s.prefix_offset <= s.read_offset <= len(window):
        raise bad_request(
            f"stream_state offsets out of range: need prefix_offset ({s.prefix_offset}) <= "
            f"read_offset ({s.read_offset}) <= the window's length ({len(window)})",
            param=where,
        )
    if any(not 0 <= t < vocab.size for t in s.logprob_context_token_ids):
        raise bad_request(
            f"stream_state.logprob_context_token_ids has an id outside the vocabulary "
            f"(vocab size {vocab.size})",
            param=f"{where}.logprob_context_token_ids",
        )
    total = sum(s.output_chunk_lens)
    if total != len(s.output_token_ids):
        raise bad_request(
            f"output_chunk_lens must sum to len(output_token_ids) "
            f"(got sum={total}, len(output_token_ids)={len(s.output_token_ids)})",
            param=f"{where}.output_chunk_lens",
        )
    offset = s.logprob_text_offset
    return ChoiceState(
        text=TextState(window, s.prefix_offset, s.read_offset, sent=offset),
        role_sent=s.role_sent, calls=s.tools_streamed,
        context=list(s.logprob_context_token_ids), lead_count=offset,
    )


def _vllm_window(s: StreamStateIn, vocab: Vocab) -> list[int]:
    """The decode window as ids, from whichever form the state carries."""
    if s.prev_tokens and s.prev_token_ids:
        raise bad_request(
            "stream_state has both prev_tokens (vLLM 0.33) and prev_token_ids (vLLM 0.34): send one",
            param="stream_state",
        )
    field = "prev_tokens" if s.prev_tokens else "prev_token_ids"
    given: list[str] | list[int] = s.prev_tokens or s.prev_token_ids
    if len(given) > _VLLM_MAX_PREV_TOKENS:
        raise bad_request(
            f"{field} length ({len(given)}) exceeds maximum ({_VLLM_MAX_PREV_TOKENS})",
            param=f"stream_state.{field}",
        )
    if s.prev_token_ids:
        bad = next((t for t in s.prev_token_ids if t >= vocab.size), None)
        if bad is not None:
            raise bad_request(
                f"stream_state.prev_token_ids holds {bad}, outside the vocabulary (vocab size {vocab.size})",
                param="stream_state.prev_token_ids",
            )
        return list(s.prev_token_ids)
    lookup = vocab.token_to_id
    try:
        return [lookup[t] for t in s.prev_tokens]
    except KeyError as exc:
        raise bad_request(
            f"stream_state.prev_tokens holds {exc.args[0]!r}, which is not a token of this model",
            param="stream_state.prev_tokens",
        ) from None


def write(out: StreamStateOut, given: StreamStateIn, state: ChoiceState,
          choice: ChatStreamChoice | CompletionStreamChoice | None, delta_ids: list[int],
          parsed: bool, profile: Profile, vocab: Vocab) -> None:
    """vLLM's fields after this chunk, as the profile's release writes them:
    its plain window (ours: the same one, but for a held stop token), or on
    the parser path the output ids it replays."""
    if parsed:  # vLLM's parser path leaves the plain window as it came
        window, prefix, read = _vllm_window(given, vocab), given.prefix_offset, given.read_offset
    else:
        window, prefix, read = state.text.tokens[state.text.prefix:], 0, state.text.read - state.text.prefix
    if profile.stream_state_form == "prev_token_ids":
        out.prev_token_ids = window
    else:
        out.prev_tokens = [vocab.pieces[t] for t in window]
    out.prefix_offset, out.read_offset = prefix, read
    out.role_sent = state.role_sent
    out.logprob_context_token_ids = (given.logprob_context_token_ids + delta_ids)[-REPAIR_CONTEXT:]
    offset = given.logprob_text_offset
    if isinstance(choice, CompletionStreamChoice):  # vLLM's sum of token strings (else of the text)
        lp = choice.logprobs
        offset += sum(map(len, lp.tokens)) if lp is not None and lp.tokens else len(choice.text)
    out.logprob_text_offset = offset
    out.output_token_ids, out.output_chunk_lens = given.output_token_ids, given.output_chunk_lens
    out.tools_streamed, out.last_tool_call_ids = given.tools_streamed, given.last_tool_call_ids
    if parsed and delta_ids:
        out.output_token_ids = given.output_token_ids + delta_ids
        out.output_chunk_lens = [*given.output_chunk_lens, len(delta_ids)]
    if parsed and isinstance(choice, ChatStreamChoice):
        out.tools_streamed = given.tools_streamed or state.calls
        calls = choice.delta.tool_calls or []
        out.last_tool_call_ids = given.last_tool_call_ids + [c.id for c in calls if c.id is not None]

