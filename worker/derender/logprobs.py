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

from collections.abc import Sequence
from typing import Literal

from derender_queue.contract import (
    CompletionLogProbs,
    GenerateLogProbsContent,
    LogProbCandidate,
    LogProbEntry,
)

from derender_queue.errors import bad_request

from .vocab import Vocab

TokenForm = Literal["vllm", "openai", "token_id"]
_CONTEXT = 4  # preceding sampled ids `_correct_decoded_token` may read
_REPLACEMENT = "\ufffd"


class TokenStrings:
    """Spells logprob `token` strings in one of the three forms.

    `table[id]` is the spelling; ids in `repair` (vLLM form only: tokens whose
    own decode ends in U+FFFD) are re-spelled in context by `repaired`.
    """

    def __init__(self, vocab: Vocab, form: TokenForm) -> None:
        self.vocab = vocab
        self.form = form
        self.table: Sequence[str] = {
            "vllm": vocab.single_text, "openai": vocab.openai_text, "token_id": _TokenIdNames()
        }[form]
        self.repair: frozenset[int] = vocab.partial_ids if form == "vllm" else frozenset()
        self._memo: dict[tuple[int, ...], str] = {}

    def spell(self, tid: int, context: list[int]) -> str:
        return self.repaired(tid, context) if tid in self.repair else self.table[tid]

    def repaired(self, tid: int, context: list[int]) -> str:
        key = (*context[-_CONTEXT:], tid)
        text = self._memo.get(key)
        if text is None:
            text = self._memo[key] = correct_decoded_token(self.vocab, tid, context)
        return text


class _TokenIdNames:
    """vLLM's `return_tokens_as_token_ids` spelling, as a lookup table."""

    def __getitem__(self, tid: int) -> str:
        return f"token_id:{tid}"


def correct_decoded_token(vocab: Vocab, tid: int, context: list[int]) -> str:
    """vLLM's `_correct_decoded_token`: repair a U+FFFD-ending token string
    with up to four preceding sampled tokens as context."""
    decode = vocab.decode
    for n in range(1, min(len(context), _CONTEXT) + 1):
        ctx = context[-n:]
        full = decode(ctx + [tid])
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
        for a, b in zip(prefix, full):
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
    string, one for the pre-encoded bytes, and a compare for the float.
    """
    byte_json = strings.vocab.byte_json
    table, repair, repaired = strings.table, strings.repair, strings.repaired
    ctx = list(context)
    out: list[LogProbEntry] = []
    for entry in content:
        tops = entry.top_logprobs or ()
        if top_limit is not None:
            tops = tops[:top_limit]
        candidates = [
            LogProbCandidate(
                repaired(c.token_id, ctx) if c.token_id in repair else table[c.token_id],
                c.logprob if c.logprob > -1e308 else clamp(c.logprob),
                byte_json[c.token_id],
            )
            for c in tops
        ]
        tid, lp = entry.token_id, entry.logprob
        token = repaired(tid, ctx) if tid in repair else table[tid]
        out.append(LogProbEntry(token, lp if lp > -1e308 else clamp(lp), byte_json[tid], candidates))
        ctx.append(tid)
    return out


def completion_logprobs(
    content: Sequence[GenerateLogProbsContent],
    entries: list[LogProbEntry],
    offsets: list[int],
) -> CompletionLogProbs:
    """Chat entries -> the parallel lists of `/v1/completions`.

    A position whose generate entry had no candidates reports `None`, as vLLM.
    `offsets` are character offsets into the returned text.
    """
    tops: list[dict[str, float] | None] = [
        {c.token: c.logprob for c in e.top_logprobs} if src.top_logprobs else None
        for e, src in zip(entries, content)
    ]
    return CompletionLogProbs(
        text_offset=offsets,
        token_logprobs=[e.logprob for e in entries],
        tokens=[e.token for e in entries],
        top_logprobs=tops,
    )


def text_offsets(vocab: Vocab, ids: Sequence[int], skip: frozenset[int], limit: int) -> list[int]:
    """Character offset into the text at which each token's output starts.

    Counts the characters completed by the bytes before each token (a token
    that finishes a split character starts where that character does);
    skipped special tokens add nothing; offsets never pass the text's end
    (tokens after a stop string all sit at `limit`).
    """
    raw = vocab.raw_bytes
    leads = vocab.lead_bytes
    out: list[int] = []
    chars = 0
    for tid in ids:
        data = raw[tid]
        # A leading continuation byte: the character it belongs to is open.
        open_char = bool(data) and 0x80 <= data[0] <= 0xBF and chars > 0
        out.append(min(chars - open_char, limit))
        if tid not in skip:
            chars += leads[tid]
    return out
