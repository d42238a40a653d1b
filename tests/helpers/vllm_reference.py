"""A line-by-line port of vLLM 0.33's derender detokenization, as a test oracle.

It runs on the `tokenizers` library itself (`decoder.decode` of string pieces,
which is what transformers' `convert_tokens_to_string` calls), token by token,
exactly as `detokenize_incrementally` and `OnlineDerenderer._detokenize_delta`
do. Slow on purpose: it shares no code or tables with the implementation.
"""

from __future__ import annotations

from tokenizers import Tokenizer

INITIAL_OFFSET = 5


class ReferenceDetokenizer:
    def __init__(self, tokenizer: Tokenizer, special_ids: frozenset[int]) -> None:
        self.tok = tokenizer
        self.special_ids = special_ids

    def ids_to_tokens(self, ids: list[int], skip_special: bool) -> list[str]:
        return [
            self.tok.id_to_token(i) or ""
            for i in ids
            if not (skip_special and i in self.special_ids)
        ]

    def to_string(self, tokens: list[str]) -> str:
        return self.tok.decoder.decode(tokens) if tokens else ""

    def seed(self, prompt_ids: list[int] | None, skip_special: bool) -> tuple[list[str], int, int]:
        if not prompt_ids:
            return [], 0, 0
        tokens = self.ids_to_tokens(prompt_ids[-INITIAL_OFFSET - 2 :], skip_special)
        read = len(tokens)
        return tokens, max(read - INITIAL_OFFSET, 0), read

    def step(self, prev: list[str], prefix: int, read: int, tid: int, skip_special: bool):
        new_tokens = self.ids_to_tokens([tid], skip_special)
        window_start = min(prefix, read, len(prev))
        output = (prev[window_start:] if window_start else prev) + new_tokens
        prefix_text = self.to_string(output[prefix - window_start : read - window_start])
        new_text = self.to_string(output[prefix - window_start :])
        if len(new_text) <= len(prefix_text) or new_text.endswith("\ufffd"):
            return new_tokens, "", prefix, read
        return new_tokens, new_text[len(prefix_text) :], read, len(prev) + len(new_tokens)

    def feed(self, state: tuple[list[str], int, int], ids: list[int], skip_special: bool):
        """`_detokenize_delta`: step every id, trimming the window each time."""
        prev, prefix, read = list(state[0]), state[1], state[2]
        parts = []
        for tid in ids:
            new, text, prefix, read = self.step(prev, prefix, read, tid, skip_special)
            prev = (prev + new)[prefix:]
            read -= prefix
            prefix = 0
            parts.append(text)
        return "".join(parts), (prev, prefix, read)

    def decode(self, prompt_ids: list[int] | None, ids: list[int], skip_special: bool) -> str:
        return self.feed(self.seed(prompt_ids, skip_special), ids, skip_special)[0]
