"""A streamed choice's logprobs, chunk by chunk, equal to the whole choice's.

Both forms carry the last 4 sampled ids (the context vLLM's U+FFFD repair
reads) from chunk to chunk, and each chunk carries its own tokens' entries,
as vLLM's do, with one exception. Completion logprobs also carry the count
of characters their tokens started (`text_offset` is a character offset
into the returned text, clamped to its final length), so an entry that
starts past the text released so far waits for that text: after a
character still split across tokens (which may never be completed, and
then never shows), or text a stop string may still cut (stream_text.py
holds it).
"""

from __future__ import annotations

from collections.abc import Sequence

from derender_queue.contract.requests import GenerateLogProbsContent
from derender_queue.contract.responses import ChatLogProbs, CompletionLogProbs
from derender_queue.contract.stream_requests import GenerateStreamChoice

from . import logprobs as whole
from .detokenize import DecodeState, Detokenizer
from .logprobs import REPAIR_CONTEXT, TokenStrings, checked
from .stream_state import ChoiceState, HeldLogprobs


def chat_logprobs(strings: TokenStrings, top_limit: int | None, s: ChoiceState,
                  choice: GenerateStreamChoice) -> ChatLogProbs:
    assert choice.logprobs is not None  # the caller only asks for a choice with logprobs
    logprobs = whole.chat_logprobs(choice.logprobs, choice.index, strings, top_limit, s.context)
    content = choice.logprobs.content
    if content is not None:
        s.context = _context(s.context, content)
    return logprobs


def completion_logprobs(strings: TokenStrings, top_limit: int | None, s: ChoiceState,
                        choice: GenerateStreamChoice, final: bool, fresh: bool,
                        detok: Detokenizer, before: DecodeState) -> CompletionLogProbs | None:
    """This chunk's entries, and earlier ones whose text it released.

    `detok` is the request's Detokenizer, `before` the text's decode window
    before this chunk (the prompt seed on the first).
    """
    skip = detok.skip
    held = s.held_logprobs
    if choice.logprobs is None and held is None:
        return None
    lists = held or HeldLogprobs([], [], [], [])
    content = choice.logprobs.content if choice.logprobs is not None else None
    if content:
        vocab = strings.vocab
        ids: list[int] = [e.token_id for e in content]  # type: ignore[misc]  # a None id: TypeError, checked() 400s
        if vocab.byte_level and fresh and not s.lead_count:
            s.lead_count = whole.text_start(vocab, ids, skip, seeded=False)

        def build() -> tuple[CompletionLogProbs, list[int], int, int]:
            if strings.form == "placeholder":
                starts, count = whole.placeholder_offsets(ids, s.lead_count)
                owed = 0
            elif vocab.byte_level:
                starts, count, owed = whole.walk_offsets(vocab, ids, skip, s.lead_count, s.owed)
            else:
                state = before if s.offset_window is None else DecodeState(
                    s.offset_window, s.offset_prefix, s.offset_read)
                starts, count, state = whole.emission_offsets(detok, state, ids, s.lead_count)
                s.offset_window, s.offset_prefix, s.offset_read = state.tokens, state.prefix, state.read
                owed = 0
            return whole.completion_logprobs(content, strings, top_limit, starts, s.context), starts, count, owed

        new, starts, s.lead_count, s.owed = checked(build, content, vocab.size, choice.index)
        s.context = _context(s.context, content)
        lists = HeldLogprobs(lists.tokens + new.tokens, lists.logprobs + new.token_logprobs,
                             lists.tops + new.top_logprobs, lists.starts + starts)
    limit = s.text.sent
    starts = lists.starts
    # Release the entries whose text went out: a prefix (offsets never decrease).
    if final or strings.form == "placeholder":  # (placeholder offsets do not point into the text)
        n = len(starts)
    else:
        n = next((i for i, c in enumerate(starts) if c > limit), len(starts))
    s.held_logprobs = None if n == len(starts) else HeldLogprobs(
        lists.tokens[n:], lists.logprobs[n:], lists.tops[n:], starts[n:])
    if strings.form == "placeholder":
        offsets = starts[:n]  # sums of spellings, not offsets into the text
    elif final:
        offsets = [min(max(c, 0), limit) for c in starts[:n]]
    else:
        offsets = [max(c, 0) for c in starts[:n]]
    return CompletionLogProbs(offsets, lists.logprobs[:n], lists.tokens[:n], lists.tops[:n])


def _context(context: list[int], content: Sequence[GenerateLogProbsContent]) -> list[int]:
    """The sampled ids the next chunk's logprob repair reads."""
    return (context + [e.token_id for e in content[-REPAIR_CONTEXT:]])[-REPAIR_CONTEXT:]  # type: ignore[return-value]  # ids checked
