"""A chat choice's parser, resumed from its carried state for each chunk.

The ordinary path expands the carried (compacted) state, builds the parser
from it, feeds the chunk's text and compacts its new state.  Most chunks of
a long output need none of that: their text is plain reasoning or plain
content that the parser would route whole and leave its state as it was
(core/parsers/passage.py).  So each carried state's `Passage`, asked of the
parser the first time that state is resumed, is remembered per run (keyed by
the state's encoding: the streams of a run mostly share their steady
states), and a chunk it vouches for is answered from it.  A stage that holds
trailing whitespace (or a lexer a marker's first characters) back changes
its state only in what it holds: the state after such a chunk is learnt from
the parser the first time, by what it holds, and reused.  A state past
`_KEY_MAX` bytes is not looked up: it holds text that vLLM's rule decides at
the end (a held output grows by every chunk, so its state never recurs and
has no passage), and hashing it would cost every chunk time in the size of
the held text.  A growing passage (a stage holding all it is given: passage.py
`holding`) is kept under the state without its buffer, and a chunk it
vouches for is appended to the buffer in the carried state (`_grown`), and
past the Spill's inline size the buffer's text goes to the store from there
(parsers/buffer.py `appended`, as its `dump()` would).  One that also sends
the text (Cohere's) holds trailing whitespace back in the state, kept out of
the key too: the stream reads it and writes what the chunk leaves held.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import msgspec

from .parsers import ParsedDelta, ParseRequest, ParserFactory, Passage
from .parsers.buffer import appended
from .parsers.passage import WITHHELD_MAX, Held, sent_and_held
from .parsers.spill import current
from .stream_state import ChoiceState, compact, expand

# Passages remembered per run, then all forgotten at once; states after a
# held-whitespace chunk remembered per passage (a few whitespace runs recur).
_PASSAGES_KEPT, _AFTERS_KEPT = 128, 16
_state_key = msgspec.msgpack.Encoder().encode
# Steady states are flags and a few held characters: tens of bytes.
_KEY_MAX = 2048


class Passing(NamedTuple):
    """A carried parser state's passage, and the states after a passing chunk
    by what it leaves held (each the same for every such chunk)."""

    passage: Passage
    afters: dict[Held, Any]
    fresh: Any = None
    """What the fresh state holds beside the buffer (a sending passage's held whitespace)."""


class ParsingRun(Protocol):
    """What a stream's run (core/stream.py) holds for its parser."""

    @property
    def factory(self) -> ParserFactory | None: ...
    @property
    def parse_request(self) -> ParseRequest | None: ...
    @property
    def parser_ref(self) -> dict[str, Any] | None: ...
    @property
    def passages(self) -> dict[bytes, Passing]: ...
    @property
    def growing(self) -> set[tuple[tuple[str, ...], str]]: ...


def parse_chunk(run: ParsingRun, s: ChoiceState, text: str, ids: list[int], final: bool) -> ParsedDelta:
    """Resume the parser from its state, feed it, and keep its new state."""
    assert run.factory is not None and run.parse_request is not None  # only runs with a parser get here
    key, learn = None, None
    if text and not final and run.growing and (grown := _grown(run, s, text)) is not None:
        return grown
    if text and not final and len(encoded := _state_key(s.parser)) <= _KEY_MAX:
        key = encoded
        known = run.passages.get(key)
        if known is not None and (routed := known.passage.route(text)) is not None:
            sent, held = routed
            if held == known.passage.held:
                return known.passage.delta(sent)  # the state stays as it came
            after = known.afters.get(held)
            if after is not None:
                s.parser = after
                return known.passage.delta(sent)
            learn = known, held  # the state that holds `held`: learnt from this chunk
    spill = current()
    loaded, kept, writes = (len(spill.loaded), len(spill.kept), len(spill.writes)) if spill else (0, 0, 0)
    carried = None if s.parser is None else expand(s.parser, run.parser_ref)
    parser = run.factory(run.parse_request, state=carried)
    if key is not None and key not in run.passages and (passage := parser.passage()) is not None:
        paths, fresh = None, None
        if passage.grows:  # kept under the state without its buffer (None: it holds none yet)
            paths = (passage.grows, passage.withholds)
            detached = _detached(s.parser, *paths)
            key = None if detached is None else _state_key(detached[0])
            if passage.withholds:
                fresh = _value(run.parser_ref, passage.grows[:-1])[passage.withholds]
        if key is not None:
            if len(run.passages) >= _PASSAGES_KEPT:
                run.passages.clear()
            run.passages[key] = Passing(passage, {}, fresh)
            if paths is not None:
                run.growing.add(paths)
    parsed = parser.feed(text, ids) if text else ParsedDelta()
    if final:
        parsed.extend(parser.finish())
    s.parser = None if final else compact(parser.to_state(), run.parser_ref)
    if spill is not None:
        if len(spill.loaded) > loaded:  # stored text the new state no longer refers to
            spill.drops.extend(set(spill.loaded[loaded:]).difference(spill.kept[kept:]))
        if len(spill.writes) > writes:
            learn = None  # a state learnt here would skip the write when reused
    if learn is not None and len(learn[0].afters) < _AFTERS_KEPT:
        learn[0].afters[learn[1]] = s.parser
    return parsed


def _grown(run: ParsingRun, s: ChoiceState, text: str) -> ParsedDelta | None:
    """What a growing passage of the carried state sends of `text`, having
    appended it to its buffer in `s.parser` (module docstring); else None."""
    for paths in run.growing:
        detached = _detached(s.parser, *paths)
        if detached is None:
            continue
        without, stage, buffer, withheld = detached
        known = run.passages.get(_state_key(without))
        if known is None or (known.passage.grows, known.passage.withholds) != paths:
            continue
        passage = known.passage
        if not passage.grows_by(buffer, text):
            return None
        sent = text
        if passage.strips:  # a sending passage: the whitespace it holds back is in the state
            fresh = known.fresh
            lead = fresh if withheld is _ABSENT else withheld
            if type(lead) is not str:
                return None  # a long run is carried as its length
            sent, held = sent_and_held(lead + text)
            if len(held) > WITHHELD_MAX:
                return None
            withheld = _ABSENT if held == fresh else held  # (as `compact` leaves it out)
        if passage.withholds:  # (`_detached` left None there)
            if withheld is _ABSENT:
                del stage[passage.withholds]
            else:
                stage[passage.withholds] = withheld
        stage[passage.grows[-1]] = appended(buffer, text, current())
        s.parser = without
        return passage.delta(sent)
    return None


_ABSENT: Any = object()


def _detached(
    state: Any, path: tuple[str, ...], beside: str = ""
) -> tuple[dict[str, Any], dict[str, Any], Any, Any] | None:
    """`state` with None for its buffer at `path` and the key `beside` it (the
    dicts on the way copied: a carried state may be one the passage cache
    shares), the copied dict holding them, the buffer, and what was beside it
    (`_ABSENT` where nothing: a key equal to the fresh state's is not in a
    compacted one); None where the state holds no buffer there."""
    if type(state) is not dict:
        return None
    top = out = dict(state)
    for name in path[:-1]:
        inner = out.get(name)
        if type(inner) is not dict:
            return None
        out[name] = inner = dict(inner)
        out = inner
    buffer = out.get(path[-1])
    if not (type(buffer) is str or (type(buffer) is list and len(buffer) == 5)):
        return None
    out[path[-1]] = None
    withheld = _ABSENT
    if beside:
        withheld = out.get(beside, _ABSENT)
        out[beside] = None
    return top, out, buffer, withheld


def _value(state: Any, path: tuple[str, ...]) -> Any:
    """What a full (fresh) state holds at `path`."""
    for name in path:
        state = state[name]
    return state
