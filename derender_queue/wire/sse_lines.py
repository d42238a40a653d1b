"""A generate stage's SSE, read one line at a time: the one rule for the API's
SSE route (api/sse_body.py) and the producers' streaming helper
(wire/streaming.py). docs/streaming.md describes it to users.

- Every `data:` line of an unnamed event (or `event: message`) is one
  generate chunk, never anything else. The fields sent with every chunk may
  come first, as one `event: request` event. `data: [DONE]` ends the
  stream; comments (`:`), `id:` and `retry:` lines and blank lines carry
  nothing.
- The form earlier callers used, still accepted: a first line that is a bare
  JSON object holds the shared fields (`{}` for none); later bare JSON lines
  are chunks.

Anything else is a 400 naming the line: nothing is skipped or guessed, so no
chunk is ever dropped silently.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from derender_queue.errors import bad_request

DONE = b"[DONE]"
_CHUNK_EVENTS = (b"", b"message")
_REQUEST_EVENT = b"request"


class SseItem(NamedTuple):
    kind: Literal["fields", "chunk", "done"]
    payload: bytes


class SseLines:
    """Reads lines in order (`number`: the lines read so far, for errors)."""

    def __init__(self) -> None:
        self.number = 0
        self._event = b""
        self._fields_seen = self._chunks_seen = False

    def read(self, line: bytes) -> SseItem | None:
        """What the line (without its line ending) carries, if anything."""
        self.number += 1
        if not line.strip():
            self._event = b""  # a blank line ends the event
            return None
        if line.startswith(b":"):
            return None
        if line.lstrip().startswith(b"{"):  # a bare JSON line
            first = not (self._fields_seen or self._chunks_seen)
            self._fields_seen |= first
            self._chunks_seen |= not first
            return SseItem("fields" if first else "chunk", line.strip())
        name, _, value = line.partition(b":")
        value = value.strip()
        if name == b"data":
            return self._data(value)
        if name == b"event":
            if value != _REQUEST_EVENT and value not in _CHUNK_EVENTS:
                raise bad_request(f"line {self.number}: unknown event `{value.decode(errors='replace')}` "
                                  "(`request` carries the shared fields; chunks come in unnamed events)")
            self._event = value
            return None
        if name in (b"id", b"retry"):
            return None
        raise bad_request(f"line {self.number} is neither an SSE line (`data:`, `event:`, `id:`, `retry:`, "
                          f"a `:` comment) nor a JSON object: {line[:60]!r}")

    def _data(self, value: bytes) -> SseItem:
        if value == DONE:
            return SseItem("done", b"")
        if self._event != _REQUEST_EVENT:
            self._chunks_seen = True
            return SseItem("chunk", value)
        if self._fields_seen or self._chunks_seen:
            raise bad_request(f"line {self.number}: one `event: request` only, before the first chunk")
        self._fields_seen = True
        return SseItem("fields", value)
