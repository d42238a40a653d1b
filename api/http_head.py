"""uvicorn's httptools protocol with the request head bounded in size and time.

httptools (llhttp) puts no limit on a request line or header, and uvicorn
none on how long a head may take (its keep-alive timeout only runs between
requests, and stops at the first byte), so before any authentication a
client could grow the API's memory without bound with one header line that
never ends, or hold connections open with heads it never finishes. Here:

- a head (request line and headers) over HEAD_LIMIT_BYTES is answered 431
  and its connection closed, once that many bytes have come without its end;
- a head not complete `head_timeout_s` (DERENDER_BODY_IDLE_TIMEOUT_S) after
  its first byte, or after the connection opened, is answered 408 and its
  connection closed.

Both answers are JSON in vLLM's error shape, counted in
`derender_api_rejected_total` (`head_too_large`, `head_timeout`). The fast
path is httptools' own: a head costs one timer armed and cancelled.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from derender_queue.contract.error_shape import error_body

from . import metrics

HEAD_LIMIT_BYTES = 64 * 1024
"""Far above any head a client sends (long traceparent, API key and URL
included); h11's default is 16 KiB, nginx's 4 x 8 KiB lines."""


class BoundedHeadProtocol(HttpToolsProtocol):
    head_timeout_s = 10.0
    """Set per server (`with_head_timeout`)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]  # uvicorn narrows it to Transport
        self._in_head = True
        self._head_bytes = 0
        self._head_timer: asyncio.TimerHandle | None = None
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._in_head:  # the whole read counts: at most one read more than the head
            self._head_bytes += len(data)
        super().data_received(data)
        if self._in_head and self._head_bytes > HEAD_LIMIT_BYTES and not self.transport.is_closing():
            self._refuse(431, "head_too_large", f"the request head exceeds {HEAD_LIMIT_BYTES} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._disarm()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head, self._head_bytes = True, 0  # what comes next is the next request's head

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self._in_head or self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self._arm()  # a pipelined head, behind a response still being sent: look again later
        else:
            self._refuse(408, "head_timeout", f"no complete request head within {self.head_timeout_s:g} s")

    def _refuse(self, status: int, reason: str, message: str) -> None:
        metrics.REJECTED.labels(reason).inc()
        body = error_body(status, message)
        head = [STATUS_LINE[status], *(name + b": " + value + b"\r\n" for name, value in
                                       self.server_state.default_headers),
                b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body)]
        self.transport.write(b"".join(head) + body)
        self.transport.close()


def with_head_timeout(seconds: float) -> type[BoundedHeadProtocol]:
    """The protocol class for a server whose heads must arrive within `seconds`."""
    return type("BoundedHeadProtocol", (BoundedHeadProtocol,), {"head_timeout_s": seconds})
