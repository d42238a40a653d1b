"""vLLM's incremental detokenization, reproduced exactly and made cheap.

vLLM decodes one token at a time (`detokenize_incrementally`): it re-decodes a
small window of tokens, emits the new text unless it ends in U+FFFD (a
character still split across tokens), and then slides the window. Its text is
therefore not always `tokenizer.decode(ids)`: a trailing partial character is
never emitted and an invalid byte run can be reported differently.

`step_exact` is that algorithm on our tables. For ByteLevel vocabularies the
common case (a window whose bytes are valid UTF-8) takes `_feed_clean`: one
join and one UTF-8 decode for the whole chunk, plus a short backwards scan
that finds where vLLM's window would end up, so the state matches too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .vocab import Vocab

# vLLM's INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET.
_SEED_WINDOW = 5
_REPLACEMENT = "\ufffd"


@dataclass(slots=True)
class DecodeState:
    """The window vLLM carries between tokens: ids from its prefix offset on."""

    tokens: list[int] = field(default_factory=list)
    prefix: int = 0
    read: int = 0


# `_feed_clean`'s answer (compared by identity) when one id must be stepped exactly first.
_STEP_ONE = ("", DecodeState())


def seed_state(vocab: Vocab, prompt_ids: list[int] | None, skip_special: bool) -> DecodeState:
    """vLLM's `convert_prompt_ids_to_tokens`: prime the window from the prompt
    tail so the first output token decodes in context (keeps its leading space
    on Metaspace tokenizers)."""
    if not prompt_ids:
        return DecodeState()
    tail = prompt_ids[-_SEED_WINDOW - 2 :]
    tokens = [t for t in tail if not (skip_special and t in vocab.special_ids)]
    read = len(tokens)
    return DecodeState(tokens, max(read - _SEED_WINDOW, 0), read)


class Detokenizer:
    """Feeds token ids through vLLM's incremental decode for one vocabulary."""

    def __init__(self, vocab: Vocab, skip_special: bool) -> None:
        self.vocab = vocab
        self.skip = vocab.special_ids if skip_special else frozenset()
        self.whole = vocab.whole_text

    def feed(self, state: DecodeState, ids: list[int]) -> tuple[str, DecodeState]:
        """Text vLLM emits for `ids` after `state`, and the state after them."""
        if self.skip:
            skip = self.skip
            if ids and ids[0] in skip and state.prefix:
                # vLLM still steps a skipped token: it emits nothing but trims
                # the window to its prefix (later steps trim anyway).
                state = DecodeState(state.tokens[state.prefix :], 0, state.read - state.prefix)
            if not skip.isdisjoint(ids):
                ids = [t for t in ids if t not in skip]
        if len(ids) == 1 and self.whole:
            one = self._feed_whole(state, ids[0])
            if one is not None:
                return one  # a stream's 1-token chunks, mostly
        if ids and self.vocab.byte_level:
            fast = self._feed_clean(state, ids)
            if fast is not None and fast is not _STEP_ONE:
                return fast  # most chunks: the whole chunk in one pass
        parts: list[str] = []
        i = 0
        while i < len(ids):
            fast = self._feed_clean(state, ids[i:]) if self.vocab.byte_level else None
            if fast is _STEP_ONE:
                # The emitted part of the window holds a broken character: step
                # exactly until the window slides past it, then try again.
                text, state = self.step_exact(state, ids[i])
                parts.append(text)
                i += 1
            elif fast is not None:
                parts.append(fast[0])
                state = fast[1]
                break
            else:
                for tid in ids[i:]:
                    text, state = self.step_exact(state, tid)
                    parts.append(text)
                break
        return "".join(parts), state

    def step_exact(self, state: DecodeState, tid: int) -> tuple[str, DecodeState]:
        """One `detokenize_incrementally` call followed by derender's trim."""
        decode = self.vocab.decode
        tokens = [*state.tokens, tid]
        prefix_text = decode(tokens[state.prefix : state.read])
        new_text = decode(tokens[state.prefix :])
        if len(new_text) <= len(prefix_text) or new_text.endswith(_REPLACEMENT):
            # Nothing to emit; the window is still trimmed to its prefix.
            return "", DecodeState(tokens[state.prefix :], 0, state.read - state.prefix)
        # Emit, then slide: prefix <- read, read <- end, drop what is before prefix.
        return new_text[len(prefix_text) :], DecodeState(tokens[state.read :], 0, len(tokens) - state.read)

    def _feed_whole(self, state: DecodeState, tid: int) -> tuple[str, DecodeState] | None:
        """`_feed_clean` of one id in a stream's steady state, without the
        joins: the window is what vLLM last emitted (nothing held past the
        read offset, no prefix) and it and `tid` are whole tokens
        (`Vocab.whole_text`). Then their bytes are clean and on character
        boundaries, so `tid`'s own text is emitted and the window becomes
        `[tid]`, read after it. None where that does not hold."""
        whole = self.whole
        text = whole[tid]
        tokens = state.tokens
        if text is None or state.prefix or state.read != len(tokens):
            return None
        for t in tokens:
            if whole[t] is None:
                return None
        return text, DecodeState([tid], 0, 1)

    def _feed_clean(self, state: DecodeState, ids: list[int]) -> tuple[str, DecodeState] | None:
        """The whole chunk at once; `_STEP_ONE` when the window's emitted part
        (up to the read offset) ends inside a character (a prompt seed can;
        vLLM then never completes it), so the next id must be stepped exactly;
        None when the chunk's bytes are not clean UTF-8 either way.

        With valid UTF-8 every window vLLM decodes is aligned on characters, so
        the emitted text telescopes to one decode. vLLM emits at token i iff
        the bytes up to i end on a character boundary and token i-1 is not
        empty; the last two such points are the window it ends with.
        """
        raw = self.vocab.raw_bytes
        window = state.tokens[state.prefix :] + ids
        chunks = [raw[t] for t in window]
        read = state.read - state.prefix
        head = b"".join(chunks[:read])
        data = b"".join(chunks)
        text = data.decode("utf-8", "replace")
        if _REPLACEMENT in text:
            # Whole characters up to the read offset (no U+FFFD there, not
            # even a literal one) let the exact steps go on in one pass.
            return None if _REPLACEMENT not in head.decode("utf-8", "replace") else _STEP_ONE
        try:
            prefix_len = len(head.decode("utf-8"))
        except UnicodeDecodeError:  # clean bytes cut inside a character
            return _STEP_ONE
        ends = _emission_points(chunks, data, read)
        if not ends:
            return "", DecodeState(window, 0, read)
        last = ends[0]
        start = ends[1] if len(ends) > 1 else read
        return text[prefix_len:], DecodeState(window[start:], 0, last - start)


def _emission_points(chunks: list[bytes], data: bytes, read: int) -> list[int]:
    """The last (up to) two positions after `read` where vLLM emits, latest first."""
    found: list[int] = []
    end = len(data)
    for i in range(len(chunks), read, -1):
        chunk = chunks[i - 1]
        if chunk and (end == len(data) or not 0x80 <= data[end] <= 0xBF):
            found.append(i)
            if len(found) == 2:
                break
        end -= len(chunk)
    return found
