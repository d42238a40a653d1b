"""A choice's text chunk by chunk, cut exactly as `output_text.decode_choice`
cuts the whole output.

The non-streaming rules decide only at the end (the final chunk brings
`finish_reason` and `stop_reason`), so two things are held back until they
cannot change any more:

* the last id of a chunk when it is an EOS or a request stop token (and
  `include_stop_str_in_output` is off): the final chunk may say generation
  stopped on it, and then it is left out of the text;
* text a stop string could still cut (or, with
  `include_stop_str_in_output`, still be reported for): from the earliest
  place where one of the request's stop strings matches, or could start to
  match at the end. That is fewer characters than the longest stop string,
  unless a whole stop string already appeared past `min_tokens` and the
  stream went on (the generate stage did not stop on it): then everything
  from it waits for the final chunk, which says whether it is cut.

vLLM's streaming derender refuses stop strings instead.
"""

from __future__ import annotations

import msgspec

from .detokenize import DecodeState, Detokenizer
from .output_text import (
    EosIds,
    StopRules,
    applicable_stops,
    drop_stop_token,
    find_stop_string,
)


class TextState(msgspec.Struct, array_like=True):
    """What one choice's text carries between chunks."""

    tokens: list[int] = msgspec.field(default_factory=list)
    prefix: int = 0
    read: int = 0
    """The detokenizer's window (`DecodeState`)."""
    fed: int = 0
    """Ids decoded so far (`min_tokens` counts these)."""
    last: int | None = None
    """The last id seen: the final chunk's stop check reads it when it has none."""
    held_id: bool = False
    """`last` is not decoded yet: it may be the stop token."""
    hold: str = ""
    """Decoded text not released yet."""
    boundary: int | None = None
    """Where the `min_tokens` text ends, relative to `hold` (None: not reached)."""
    sent: int = 0
    """Characters released so far."""

    @property
    def decode(self) -> DecodeState:
        return DecodeState(self.tokens, self.prefix, self.read)

    @decode.setter
    def decode(self, state: DecodeState) -> None:
        self.tokens, self.prefix, self.read = state.tokens, state.prefix, state.read


class StreamText:
    """The per-request rules; the state travels in `TextState`."""

    def __init__(self, detok: Detokenizer, rules: StopRules, eos: EosIds) -> None:
        self.detok = detok
        self.rules = rules
        self.eos = eos
        # A final chunk can drop only one of these (or the id an int
        # `stop_reason` names, which in practice is one of them).
        self.droppable = frozenset() if rules.include_stop_str_in_output else eos.all | rules.stop_token_ids

    def step(
        self, s: TextState, ids: list[int], finish_reason: str | None, reported: int | str | None,
    ) -> tuple[str, int | str | None]:
        """Text released by this chunk and the `stop_reason` to report: the
        reported one, decided on the final chunk (`finish_reason` set)."""
        if (finish_reason is None and ids and not s.held_id and not s.hold and s.boundary is not None
                and not self.rules.stop and ids[-1] not in self.droppable):
            # Most chunks: nothing held or to hold, `min_tokens` passed, so
            # all of the decoded text goes out (the steps below, in one).
            s.last = ids[-1]
            text, state = self.detok.feed(DecodeState(s.tokens, s.prefix, s.read), ids)
            s.tokens, s.prefix, s.read = state.tokens, state.prefix, state.read
            s.fed += len(ids)
            s.boundary = max(s.boundary - len(text), 0)
            s.sent += len(text)
            return text, reported
        held = s.last if s.held_id else None  # held_id: `last` is set
        if ids:
            s.last = ids[-1]
        if held is not None:
            ids = [held, *ids]
        stop_reason = reported  # a chunk before the final one echoes it, as vLLM's
        if finish_reason is not None:
            # A stop token already sent cannot be taken back; only an int
            # stop_reason naming an ordinary id can ask for that.
            check = ids or ([s.last] if s.last is not None else [])
            text_ids, stop_reason = drop_stop_token(check, finish_reason, reported, self.rules, self.eos)
            if not ids:
                text_ids = []
            s.held_id = False
        elif ids and ids[-1] in self.droppable:
            text_ids, s.held_id = ids[:-1], True
        else:
            text_ids, s.held_id = ids, False
        window = s.hold + self._decode(s, text_ids)
        if finish_reason is not None:
            out = window
            stops = applicable_stops(finish_reason, reported, self.rules)
            tail = len(window) - s.boundary if s.boundary is not None else 0
            match = find_stop_string(window, tail, stops, self.rules.include_stop_str_in_output)
            if match is not None:
                stop_reason, cut = match
                out = window if cut == -1 else window[:cut]
            s.hold, s.boundary = "", None
        else:
            keep = release_point(window, s.boundary, self.rules.stop) if self.rules.stop else len(window)
            out, s.hold = window[:keep], window[keep:]
            if s.boundary is not None:
                s.boundary = max(s.boundary - keep, 0)
        s.sent += len(out)
        return out, stop_reason

    def _decode(self, s: TextState, ids: list[int]) -> str:
        """Decode, noting where the first `min_tokens` ids' text ends."""
        detok = self.detok
        if s.boundary is None and s.fed + len(ids) >= self.rules.min_tokens and s.fed <= self.rules.min_tokens:
            k = self.rules.min_tokens - s.fed
            head, s.decode = detok.feed(s.decode, ids[:k])
            tail, s.decode = detok.feed(s.decode, ids[k:])
            s.boundary = len(s.hold) + len(head)
            text = head + tail
        else:
            text, s.decode = detok.feed(s.decode, ids)
        s.fed += len(ids)
        return text


def release_point(window: str, boundary: int | None, stops: tuple[str, ...]) -> int:
    """How much of `window` no stop string can cut away or report any more:
    up to the earliest place where a stop string matches, or starts to match
    at the end. (With `include_stop_str_in_output` the cut falls after the
    match, but the match must still be seen whole to be reported as the
    `stop_reason`.) A match counts only when it ends past `boundary` (the
    `min_tokens` text); an unknown boundary lies past the window.
    """
    end = len(window)
    b = end if boundary is None else boundary
    keep = end
    for stop in stops:
        lo = max(0, b + 1 - len(stop))
        at = window.find(stop, lo)
        if at != -1:
            keep = min(keep, at)
        for p in range(max(lo, end - len(stop) + 1), keep):
            if stop.startswith(window[p:]):
                keep = p
                break
    return keep
