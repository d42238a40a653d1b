"""A finished choice's text, as vLLM 0.33's engine and derender produce it.

Three rules on top of detokenization: the token that stopped generation is
left out (unless `include_stop_str_in_output`), the text is cut at the stop
string that ended it (only one that ends past the first `min_tokens` tokens),
and the `stop_reason` reported is the stop string or token that applied.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from .detokenize import DecodeState, Detokenizer


@dataclass(frozen=True)
class StopRules:
    """The request fields that decide where output stops."""

    stop: tuple[str, ...] = ()
    stop_token_ids: frozenset[int] = frozenset()
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    min_tokens: int = 0


@dataclass(frozen=True)
class EosIds:
    primary: int | None
    all: frozenset[int]


@dataclass(frozen=True)
class DecodedText:
    text: str
    stop_reason: int | str | None


def drop_stop_token(
    ids: list[int], finish_reason: str | None, stop_reason: int | str | None,
    rules: StopRules, eos: EosIds,
) -> tuple[list[int], int | str | None]:
    """vLLM's `_drop_stop_token`: leave out the token generation stopped on.

    An int `stop_reason` names it; with none reported, the last id is checked
    against the primary EOS, the request's stop tokens and the model's EOS ids
    (unless `ignore_eos`), and a non-primary match becomes the `stop_reason`.
    """
    if finish_reason != "stop" or isinstance(stop_reason, str) or not ids:
        return ids, stop_reason
    last = ids[-1]
    if stop_reason is None:
        honor_eos = not rules.ignore_eos
        if honor_eos and last == eos.primary:
            stopped = True
        elif last in rules.stop_token_ids or (honor_eos and last in eos.all):
            stopped, stop_reason = True, last
        else:
            stopped = False
    else:
        stopped = last == stop_reason
    if not stopped or rules.include_stop_str_in_output:
        return ids, stop_reason
    return ids[:-1], stop_reason


def decode_choice(
    detok: Detokenizer, seed: DecodeState, ids: list[int], finish_reason: str | None,
    reported: int | str | None, rules: StopRules, eos: EosIds,
) -> DecodedText:
    """vLLM's `_decode_output` for one choice (no request: default rules)."""
    text_ids, stop_reason = drop_stop_token(ids, finish_reason, reported, rules, eos)
    stops = applicable_stops(finish_reason, reported, rules)
    head, state = detok.feed(seed, text_ids[: rules.min_tokens])
    tail, _ = detok.feed(state, text_ids[rules.min_tokens :])
    text = head + tail
    match = find_stop_string(text, len(tail), stops, rules.include_stop_str_in_output)
    if match is not None:
        stop_reason, cut = match
        if cut != -1:
            text = text[:cut]
    return DecodedText(text, stop_reason)


def applicable_stops(finish_reason: str | None, reported: int | str | None, rules: StopRules) -> tuple[str, ...]:
    """The stop strings that may cut the text: none unless it stopped on one
    (an int `stop_reason` is a stop token), the reported one if named."""
    if finish_reason != "stop" or isinstance(reported, int):
        return ()
    if isinstance(reported, str):
        return (reported,)
    return rules.stop


def find_stop_string(
    text: str, new_chars: int, stops: tuple[str, ...], include: bool
) -> tuple[str, int] | None:
    """vLLM's `check_stop_strings`: the stop string that completes earliest
    within the last `new_chars` characters, and where to cut (-1: nowhere)."""
    if not new_chars or not stops:
        return None
    best: str | None = None
    best_index, best_end = 0, sys.maxsize
    for stop in stops:
        index = text.find(stop, 1 - new_chars - len(stop))
        if index != -1 and index + len(stop) < best_end:
            best, best_index, best_end = stop, index, index + len(stop)
    if best is None:
        return None
    if include:
        return best, (-1 if best_end >= len(text) else best_end)
    return best, best_index
