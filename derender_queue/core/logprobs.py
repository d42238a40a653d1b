"""Integer-id logprobs -> OpenAI logprob entries, by table lookup.

vLLM decodes every candidate with `tokenizer.decode([id])` and builds a
pydantic object per candidate; here each string comes from a per-vocabulary
table and only tokens that end in a broken character are re-decoded in
context (vLLM's `_correct_decoded_token`, memoised per request).

`bytes` are always the token's raw bytes (OpenAI's meaning), where vLLM gives
the UTF-8 of its repaired string (`[]` for the first piece of a split
character, U+FFFD's bytes where repair fails).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, TypeVar

from derender_queue.contract.requests import GenerateLogProbs, GenerateLogProbsContent
from derender_queue.contract.responses import ChatLogProbs, CompletionLogProbs, LogProbCandidate, LogProbEntry
from derender_queue.errors import bad_request

from .detokenize import DecodeState, Detokenizer
from .utf8 import joins, utf8_walk
from .vocab import Vocab

TokenForm = Literal["vllm", "openai", "token_id", "placeholder"]
"""`token_id` spells `token_id:N` with the token's bytes; `placeholder` as
vLLM 0.34 does, with `bytes: null` (and `text_offset` summing the spellings)."""
T = TypeVar("T")
REPAIR_CONTEXT = 4  # preceding sampled ids `_correct_decoded_token` may read (vLLM's _LOGPROB_CONTEXT_WINDOW)
_REPLACEMENT = "\ufffd"
_MEMO_KEPT = 16_384  # repaired spellings a shared TokenStrings keeps, then forgets at once


class TokenStrings:
    """Spells logprob `token` strings in one of the three forms.

    `pairs[id]` is `(spelling, pre-encoded bytes)`; the spelling is None for
    ids vLLM re-spells in context (vLLM form only: tokens whose own decode
    ends in U+FFFD), which `repaired` does.
    """

    def __init__(self, vocab: Vocab, form: TokenForm) -> None:
        self.vocab = vocab
        self.form = form
        self.pairs = vocab.logprob_pairs(form)
        self._memo: dict[tuple[int, ...], str] = {}

    @classmethod
    def shared(cls, vocab: Vocab, form: TokenForm) -> TokenStrings:
        """One per vocabulary and form for the process (streams: their chunks
        and streams share its memo, which `repaired` bounds)."""
        cache: dict[str, TokenStrings] = vocab.__dict__.setdefault("_token_strings", {})
        strings = cache.get(form)
        if strings is None:
            strings = cache[form] = cls(vocab, form)
        return strings

    def repaired(self, tid: int, context: list[int]) -> str:
        key = (*context[-REPAIR_CONTEXT:], tid)
        text = self._memo.get(key)
        if text is None:
            if len(self._memo) >= _MEMO_KEPT:  # `shared` ones live as long as the process
                self._memo = {}
            text = self._memo[key] = correct_decoded_token(self.vocab, tid, context)
        return text


def correct_decoded_token(vocab: Vocab, tid: int, context: list[int]) -> str:
    """vLLM's `_correct_decoded_token`: repair a U+FFFD-ending token string
    with up to four preceding sampled tokens as context."""
    decode = vocab.decode
    for n in range(1, min(len(context), REPAIR_CONTEXT) + 1):
        ctx = context[-n:]
        full = decode([*ctx, tid])
        if full.endswith(_REPLACEMENT):
            continue
        clean_end = len(ctx)
        for j in range(len(ctx) - 1, -1, -1):
            if ctx[j] not in vocab.partial_ids:
                break
            clean_end = j
        prefix = decode(ctx[:clean_end]) if clean_end else ""
        if full.startswith(prefix):
            return full[len(prefix) :]
        common = 0
        for a, b in zip(prefix, full, strict=False):
            if a != b:
                break
            common += 1
        return full[common:]
    return ""


def clamp(logprob: float) -> float:
    """vLLM reports -inf as -9999.0 (JSON has no infinity); NaN is refused.

    (+inf cannot get here: msgspec refuses out-of-range numbers and the
    stdlib fallback refuses `Infinity`.)
    """
    if logprob != logprob:
        raise bad_request("logprob must be a number, got NaN", param="logprobs")
    return -9999.0 if logprob == float("-inf") else logprob


def chat_entries(
    content: Sequence[GenerateLogProbsContent],
    strings: TokenStrings,
    top_limit: int | None,
    context: Sequence[int] = (),
) -> list[LogProbEntry]:
    """One OpenAI chat logprob entry per position, candidates cut to `top_limit`.

    The hot loop of top-k derender: per candidate one table lookup for the
    spelling and the pre-encoded bytes, and one compare for the float
    (NaN and -inf fail `> -1e308` and go through `clamp`).
    """
    pairs, repaired = strings.pairs, strings.repaired
    ctx = list(context)
    out: list[LogProbEntry] = []
    tid: int  # a None id raises TypeError at pairs[tid], which checked() turns into a 400
    for entry in content:
        tops = entry.top_logprobs or ()
        candidates: list[LogProbCandidate] = []
        add = candidates.append
        for c in tops if top_limit is None else tops[:top_limit]:
            tid, lp = c.token_id, c.logprob  # type: ignore[assignment]  # None: see `tid`
            token, raw = pairs[tid]
            add(LogProbCandidate(
                repaired(tid, ctx) if token is None else token, lp if lp > -1e308 else clamp(lp), raw
            ))
        tid, lp = entry.token_id, entry.logprob  # type: ignore[assignment]  # None: see `tid`
        token, raw = pairs[tid]
        token = repaired(tid, ctx) if token is None else token
        out.append(LogProbEntry(token, lp if lp > -1e308 else clamp(lp), raw, candidates))
        ctx.append(tid)
    return out


def chat_logprobs(
    logprobs: GenerateLogProbs, index: int, strings: TokenStrings, top_limit: int | None, context: Sequence[int] = ()
) -> ChatLogProbs:
    """Choice `index`'s chat `logprobs`; `context`: the sampled ids before
    them (a stream's earlier chunks)."""
    content = logprobs.content
    if content is None:
        return ChatLogProbs(None)
    entries = checked(lambda: chat_entries(content, strings, top_limit, context), content, strings.vocab.size, index)
    return ChatLogProbs(entries)


def completion_logprobs(
    content: Sequence[GenerateLogProbsContent],
    strings: TokenStrings,
    top_limit: int | None,
    offsets: list[int],
    context: Sequence[int] = (),
) -> CompletionLogProbs:
    """The parallel lists of `/v1/completions`, built in one pass.

    Candidates go straight into each position's `{token: logprob}` dict
    (duplicate spellings collapse, the last one winning, as in vLLM); a
    position whose generate entry had no candidates reports `None`.
    `offsets` are character offsets into the returned text; `context` the
    sampled ids before these (a stream's earlier chunks).
    """
    pairs, repaired = strings.pairs, strings.repaired
    ctx = list(context)
    tokens: list[str] = []
    logprobs: list[float | None] = []
    tops: list[dict[str, float] | None] = []
    tid: int  # a None id raises TypeError at pairs[tid], which checked() turns into a 400
    for entry in content:
        candidates = entry.top_logprobs
        if candidates:
            top: dict[str, float] = {}
            for c in candidates if top_limit is None else candidates[:top_limit]:
                tid, lp = c.token_id, c.logprob  # type: ignore[assignment]  # None: see `tid`
                token = pairs[tid][0]
                top[repaired(tid, ctx) if token is None else token] = lp if lp > -1e308 else clamp(lp)
            tops.append(top)
        else:
            tops.append(None)
        tid, lp = entry.token_id, entry.logprob  # type: ignore[assignment]  # None: see `tid`
        token = pairs[tid][0]
        tokens.append(repaired(tid, ctx) if token is None else token)
        logprobs.append(lp if lp > -1e308 else clamp(lp))
        ctx.append(tid)
    return CompletionLogProbs(text_offset=offsets, token_logprobs=logprobs, tokens=tokens, top_logprobs=tops)


def checked(build: Callable[[], T], content: Sequence[GenerateLogProbsContent], vocab_size: int, index: int) -> T:
    """Run a logprobs builder, turning a bad candidate id into a 400 naming it.

    Ids are range-checked by the table lookups themselves (an IndexError),
    so the common case pays nothing for validation; negatives never get here.
    """
    try:
        return build()
    except (IndexError, TypeError):
        for position, entry in enumerate(content):
            for tid in [entry.token_id, *(c.token_id for c in entry.top_logprobs or ())]:
                if tid is None or tid >= vocab_size:
                    raise bad_request(
                        f"logprobs entry {position} of choice {index} has token id {tid} "
                        f"outside the vocabulary (vocab size {vocab_size}).",
                        param="logprobs",
                    ) from None
        raise


def placeholder_offsets(ids: Sequence[int], start: int = 0) -> tuple[list[int], int]:
    """vLLM 0.34's `text_offset` for `token_id:N` spellings: the running sum
    of the spellings' lengths (not offsets into the text); and the sum after."""
    offsets: list[int] = []
    count = start
    for t in ids:
        offsets.append(count)
        count += 9 + len(str(t))  # len("token_id:") + the digits
    return offsets, count


def text_start(vocab: Vocab, ids: Sequence[int], skip: frozenset[int], seeded: bool) -> int:
    """The count `walk_offsets` starts from: -1 where the decoder strips the
    output's leading space (a SentencePiece-style vocabulary decoding without
    a prompt seed, its first shown token starting with a space), else 0."""
    if seeded or not vocab.strips_first_space:
        return 0
    raw = vocab.raw_bytes
    for t in ids:
        if t in skip or not raw[t]:
            continue
        return -1 if raw[t][:1] == b" " else 0
    return 0


def emission_offsets(
    detok: Detokenizer, state: DecodeState, ids: Sequence[int], start: int = 0
) -> tuple[list[int], int, DecodeState]:
    """`walk_offsets` for vocabularies whose decoder is not plain ByteLevel
    (SentencePiece-style: Metaspace, byte fallback, Strip), read off vLLM's
    own incremental decode: what each token's step emits.

    The same rule: a token that emits its own text starts where that text
    starts in the emission (earlier characters in it were held back for
    tokens before); a token that emits nothing yet (a piece of a character,
    an invalid byte run, a skipped special) starts at the current end. So a
    stripped leading space and the U+FFFD a byte-fallback decoder writes per
    piece of an invalid run are counted as the text has them. `detok` is
    the request's Detokenizer, `state` its DecodeState before `ids` (the
    prompt seed); returns the offsets, the count after and the state after.
    """
    single, skip = detok.vocab.single_text, detok.skip
    offsets: list[int] = []
    count = start
    for t in ids:
        text, state = detok.feed(state, [t])
        own = "" if t in skip else single[t]
        if text and own and _REPLACEMENT not in own and text.endswith(own):
            offsets.append(count + len(text) - len(own))
        else:
            offsets.append(count)
        count += len(text)
    return offsets, count, state


def walk_offsets(
    vocab: Vocab, ids: Sequence[int], skip: frozenset[int], start: int = 0, owed: int = 0
) -> tuple[list[int], int, int]:
    """Character offset into the text at which each token's output starts.

    The rule: a token's offset is the index of the first character it
    contributes to. Its leading UTF-8 continuation bytes join the character
    the bytes before it left open (so it starts where that character does);
    when no character is open they cannot join one and the token starts at
    the current end of the text (each such byte is a U+FFFD of its own).
    Skipped special tokens add nothing. Offsets are unclamped: a caller
    clamps them to the text's end (tokens after a stop string all sit
    there). `start` and `owed` are the characters and open continuation
    bytes before `ids` (a stream's earlier chunks); returns the offsets,
    the character count and the UTF-8 sequence left open after `ids`
    (`core/utf8.py`; carried by streams).
    """
    shape, raw = vocab.utf8_shape, vocab.raw_bytes
    offsets: list[int] = []
    add = offsets.append
    count = start
    for t in ids:
        if t in skip:
            add(count)
            continue
        continues, chars, after = shape[t]
        if continues:
            # Joining the open character: it was counted when it opened.
            data = raw[t]
            add(count - 1 if joins(owed, data[0]) else count)
            chars, owed = utf8_walk(owed, data)
            count += chars
        else:
            add(count)
            count += chars
            owed = after
    return offsets, count, owed
