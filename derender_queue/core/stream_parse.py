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
(parsers/buffer.py `appended`, as its `dump()` would).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import msgspec

from .parsers import ParsedDelta, ParseRequest, ParserFactory, Passage
from .parsers.buffer import appended
from .parsers.passage import Held
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
    def growing(self) -> set[tuple[str, ...]]: ...


def parse_chunk(run: ParsingRun, s: ChoiceState, text: str, ids: list[int], final: bool) -> ParsedDelta:
    """Resume the parser from its state, feed it, and keep its new state."""
    assert run.factory is not None and run.parse_request is not None  # only runs with a parser get here
    key, learn = None, None
    if text and not final and run.growing and _grown(run, s, text):
        return ParsedDelta()
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
        if passage.grows:  # kept under the state without its buffer (None: it holds none yet)
            key = None if _at(s.parser, passage.grows) is None else _without(s.parser, passage.grows)
        if key is not None:
            if len(run.passages) >= _PASSAGES_KEPT:
                run.passages.clear()
            run.passages[key] = Passing(passage, {})
            if passage.grows:
                run.growing.add(passage.grows)
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


def _grown(run: ParsingRun, s: ChoiceState, text: str) -> bool:
    """Whether a growing passage of the carried state took `text` into its
    buffer in `s.parser` (module docstring)."""
    for path in run.growing:
        buffer = _at(s.parser, path)
        if buffer is None:
            continue
        known = run.passages.get(_without(s.parser, path))
        if known is None or known.passage.grows != path:
            continue
        if not known.passage.grows_by(buffer, text):
            return False
        s.parser = _replaced(s.parser, path, appended(buffer, text, current()))
        return True
    return False


def _at(state: Any, path: tuple[str, ...]) -> Any:
    """What a compacted state holds at `path`; None where it holds no
    buffer there (a key equal to the fresh state's is not in it)."""
    for name in path:
        if type(state) is not dict or name not in state:
            return None
        state = state[name]
    return state if type(state) is str or (type(state) is list and len(state) == 5) else None


def _replaced(state: Any, path: tuple[str, ...], value: Any) -> Any:
    """`state` with `value` at `path`, copying the dicts on the way (a
    carried state may be one the passage cache shares)."""
    out = dict(state)
    out[path[0]] = value if len(path) == 1 else _replaced(state[path[0]], path[1:], value)
    return out


def _without(state: Any, path: tuple[str, ...]) -> bytes:
    """The state's key with its buffer at `path` left out."""
    return _state_key(_replaced(state, path, None))
