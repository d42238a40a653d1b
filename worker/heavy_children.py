"""Heavy jobs in child processes, from the worker's event loop.

N children forked by the zygote (worker/zygote.py), one job at a time each,
talked to over their sockets with the loop's own non-blocking socket calls
(no executor threads, no pickle). A child found dead (killed, out of memory)
is replaced at once by a new fork of the zygote, sharing the tables
copy-on-write, and the job it had is tried once more on another child: the
work is pure, so running it again is safe, and a job that kills two
children is answered with an error instead of killing more. If the zygote
itself is gone, `HeavyChildrenGone` tells the caller to run the job itself
(worker/cpu_pool.py: on its light thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable

import msgspec

from derender_queue.contract.error_shape import error_body
from derender_queue.contract.types import JobKind
from derender_queue.core import WHOLE_STEP
from worker import metrics
from worker.zygote import FRAME_HEADER_BYTES, Work, Zygote, ZygoteGone, frame_length, frames_lead, recv_exactly_async

log = logging.getLogger("derender.worker")
HeldIO = tuple[list[bytes], list[tuple[bytes, int, bytes]], list[bytes]] | None
"""Held text the work needs fetched, wrote and left (worker/cpu_pool.py)."""
Outcome = tuple[int, bytes | bytearray, str | None, int, HeldIO]
"""(HTTP status, response body, model, completion tokens, held-text I/O). A
heavy child's body is the buffer the loop received it into (written once,
then read)."""
Texts = dict[bytes, bytes]
ATTEMPTS = 2


class HeavyChildrenGone(RuntimeError):
    """No child is left and none can be forked."""


class _ChildDied(Exception):
    pass


class _Child:
    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.sock = sock
        sock.setblocking(False)

    async def call(self, head: bytes, body: bytes) -> tuple[bytearray, bytearray]:
        """Two frames out (the request's msgpack head, the body as it is), two
        back (the reply's head and body), each body received in place."""
        loop = asyncio.get_running_loop()
        try:
            await loop.sock_sendall(self.sock, frames_lead(head, body))
            await loop.sock_sendall(self.sock, body)
            size = frame_length(await self._recv(FRAME_HEADER_BYTES))
            # The reply's head and the length of its body, in one read.
            lead = await self._recv(size + FRAME_HEADER_BYTES)
            reply = await self._recv(frame_length(lead[size:]))
            return lead, reply
        except OSError as exc:
            raise _ChildDied(str(exc)) from exc

    async def _recv(self, size: int) -> bytearray:
        buf = await recv_exactly_async(self.sock, size)
        if buf is None:
            raise _ChildDied("end of file")
        return buf

    def close(self) -> None:
        # The child reads end of file and exits (PR_SET_PDEATHSIG covers the rest).
        self.sock.close()


class HeavyChildren:
    def __init__(self, work: Work, size: int, nice: int) -> None:
        """Forks the zygote and the first children: call before any thread starts."""
        self.zygote = Zygote.start(work, nice)
        self.gone = False
        self._idle: asyncio.Queue[_Child | None] = asyncio.Queue()
        self._all: set[_Child] = set()
        self._replacing: set[asyncio.Task[None]] = set()
        for _ in range(size):  # before the worker's event loop runs: a loop for each request
            self._add(*asyncio.run(self.zygote.fork_child()))

    def _add(self, pid: int, sock: socket.socket) -> None:
        child = _Child(pid, sock)
        self._all.add(child)
        self._idle.put_nowait(child)

    def idle(self) -> int:
        """Children waiting for a job now."""
        return self._idle.qsize()

    async def run(self, endpoint: JobKind, body: bytes, model: str | None,
                  share: tuple[int, int] = WHOLE_STEP, texts: Texts | None = None) -> Outcome:
        head = msgspec.msgpack.encode((endpoint, model, share, texts))
        for _ in range(ATTEMPTS):
            child = await self._idle.get()
            if child is None:
                self._idle.put_nowait(None)  # wakes the next waiter too
                raise HeavyChildrenGone("the zygote is gone")
            try:
                lead, reply = await child.call(head, body)
            except _ChildDied as exc:
                await self._replace(child, str(exc))
                continue
            except BaseException:  # cancelled mid-call: the child's stream is out of step
                self._retire(child)
                if not self.gone:
                    task = asyncio.get_running_loop().create_task(self._replace(None, "job cancelled mid-call"))
                    self._replacing.add(task)
                    task.add_done_callback(self._replacing.discard)
                raise
            self._idle.put_nowait(child)
            status, out_model, tokens, held = msgspec.msgpack.decode(memoryview(lead)[:-FRAME_HEADER_BYTES])
            return status, reply, out_model, tokens, held
        return 500, error_body(500, "the process derendering this job died"), model, 0, None

    def _retire(self, child: _Child) -> None:
        child.close()
        self._all.discard(child)

    async def _replace(self, dead: _Child | None, why: str) -> None:
        """A new fork of the zygote in place of `dead` (None: already retired)."""
        if dead is not None:
            self._retire(dead)
        if self.gone:
            return
        was = "a heavy child" if dead is None else f"heavy child {dead.pid}"
        try:
            pid, sock = await self.zygote.fork_child()
        except ZygoteGone as exc:
            log.error("%s ended (%s) and the zygote cannot fork another (%s): heavy jobs run on threads "
                      "from now on", was, why, exc)
            self.gone = True
            self._idle.put_nowait(None)
            return
        if self.gone:  # shut down meanwhile
            sock.close()
            return
        metrics.HEAVY_CHILD_RESTARTS.inc()
        log.error("%s ended (%s); replaced by %d, forked by the zygote", was, why, pid)
        self._add(pid, sock)

    def shutdown(self) -> None:
        """Children first (each exits at end of file), then the zygote."""
        self.gone = True
        for child in self._all:
            with contextlib.suppress(OSError):
                child.close()
        self._all.clear()
        self.zygote.stop()


def framed(compute: Callable[[JobKind, bytes, str | None, tuple[int, int], Texts | None], Outcome]) -> Work:
    """A child's work: `compute(endpoint, body, model, share, texts)` from a
    msgpack head and the body's bytes, its outcome as a msgpack head and the body."""

    def work(head: bytearray, body: bytearray) -> tuple[bytes, bytes]:
        endpoint, model, share, texts = msgspec.msgpack.decode(head)
        status, out, out_model, tokens, held = compute(endpoint, bytes(body), model, tuple(share), texts)
        return msgspec.msgpack.encode((status, out_model, tokens, held)), bytes(out)

    return work
