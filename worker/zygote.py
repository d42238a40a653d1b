"""The zygote: a small process that forks heavy-job children on request.

Heavy children must share the loaded model tables copy-on-write (a fresh
process would spend seconds and its own memory loading them: bench/heavy_children.py
times a fork against a fresh interpreter), so they are forked from a process
that holds the tables. The worker cannot be that process once
it runs: it has threads (light jobs, metrics) and an event loop, and forking
a threaded process copies locks that other threads held. So the worker forks
the zygote once, after loading and freezing the tables and before any thread
starts; the zygote stays single-threaded and forks every child, the first
ones and each replacement of one that died.

Protocol (Unix socket pairs, no pickle):
- control socket, worker -> zygote: one byte with one file descriptor
  (SCM_RIGHTS), the child's end of a new socket pair; the zygote forks a
  child serving on it and answers its pid (4 bytes).
- child socket: frames of an 8-byte length and their bytes; a request is two
  frames, msgpack `[endpoint, model]` and the body as it is, and so is a
  reply: msgpack `[status, model, tokens]` and the response body as it is
  (no frame wraps a body, so neither side copies one to (un)wrap it).

Nobody outlives the worker: the zygote and each child ask the kernel for
SIGKILL when their parent dies (PR_SET_PDEATHSIG), so a SIGKILLed worker
takes the zygote along and the zygote its children; and each exits when its
socket reaches end of file (its parent closed it, or is gone).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import socket
import struct
import time
from collections.abc import Callable

log = logging.getLogger("derender.worker")
PR_SET_PDEATHSIG = 1
_LENGTH = struct.Struct("!Q")
_PID = struct.Struct("!i")

Work = Callable[[bytearray, bytearray], tuple[bytes, bytes]]
"""A child's work: a request's two frames (head, body) in, the reply's two out; never raises."""


class ZygoteGone(RuntimeError):
    """The zygote stopped answering: no more children can be forked."""


def die_with_parent(parent_pid: int, sig: int = signal.SIGKILL) -> None:
    """Have the kernel send `sig` to this process when its parent dies; exit
    now if it already has. Not on Linux: nothing (our sockets' end of file
    still ends the zygote and its children)."""
    with contextlib.suppress(AttributeError, OSError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if os.getppid() != parent_pid:  # died between our fork and the request
        os._exit(0)


def recv_exactly(sock: socket.socket, size: int) -> bytearray | None:
    """`size` bytes from a blocking socket (MSG_WAITALL: the kernel waits for
    all of them); None at end of file."""
    buf = bytearray(size)
    return buf if sock.recv_into(buf, size, socket.MSG_WAITALL) == size else None


async def recv_exactly_async(sock: socket.socket, size: int) -> bytearray | None:
    """`recv_exactly` from the event loop, on a non-blocking socket."""
    loop = asyncio.get_running_loop()
    buf = bytearray(size)
    view, got = memoryview(buf), 0
    while got < size:
        n = await loop.sock_recv_into(sock, view[got:])
        if n == 0:
            return None
        got += n
    return buf


def frames_lead(head: bytes, body: bytes | bytearray) -> bytes:
    """A small head frame and the length of the body frame that follows it."""
    return _LENGTH.pack(len(head)) + head + _LENGTH.pack(len(body))


def recv_frame(sock: socket.socket) -> bytearray | None:
    head = recv_exactly(sock, _LENGTH.size)
    return None if head is None else recv_exactly(sock, frame_length(head))


def frame_length(head: bytes | bytearray) -> int:
    size: int = _LENGTH.unpack(head)[0]
    return size


FRAME_HEADER_BYTES = _LENGTH.size


class Zygote:
    """The worker's handle on its zygote process."""

    def __init__(self, pid: int, control: socket.socket) -> None:
        self.pid = pid
        self.control = control
        self._lock = asyncio.Lock()

    @classmethod
    def start(cls, work: Work, nice: int) -> Zygote:
        """Fork the zygote. Call before this process starts any thread."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = _fork("zygote", ours, _zygote_main, theirs, work, nice)
        theirs.close()
        return cls(pid, ours)

    async def fork_child(self, timeout_s: float = 10.0) -> tuple[int, socket.socket]:
        """A new child and our end of its socket; ZygoteGone if none can be
        made. The loop keeps running while the zygote forks (at start-up,
        before the worker's loop runs: `asyncio.run` it). One request at a
        time (answers come back in order)."""
        async with self._lock:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.control.setblocking(False)
                socket.send_fds(self.control, [b"f"], [theirs.fileno()])  # 1 byte: never blocks
                answer = await asyncio.wait_for(recv_exactly_async(self.control, _PID.size), timeout_s)
            except OSError as exc:  # TimeoutError included: the answers are out of step now
                ours.close()
                raise ZygoteGone(f"zygote {self.pid}: {exc!r}") from exc
            finally:
                theirs.close()
            if answer is None:
                ours.close()
                raise ZygoteGone(f"zygote {self.pid} exited")
            pid: int = _PID.unpack(answer)[0]
            return pid, ours

    def stop(self, timeout_s: float = 5.0) -> None:
        """Close the control socket (the zygote exits, its children with it) and reap it."""
        self.control.close()
        deadline = time.monotonic() + timeout_s
        with contextlib.suppress(ChildProcessError, ProcessLookupError):  # reaped already
            while os.waitpid(self.pid, os.WNOHANG)[0] == 0:
                if time.monotonic() >= deadline:
                    os.kill(self.pid, signal.SIGKILL)
                    os.waitpid(self.pid, 0)
                    return
                time.sleep(0.01)


def _fork(what: str, close: socket.socket, main: Callable[..., None], *args: object) -> int:
    """Fork a process that closes `close` (its parent's end of their socket),
    dies with its parent and runs `main(*args)`, then exits (status 1, the
    error logged, if `main` raised): it never returns into its parent's code."""
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        status = 0
        try:
            close.close()
            die_with_parent(parent)
            main(*args)
        except BaseException:
            log.exception("%s failed", what)
            status = 1
        finally:
            os._exit(status)
    return pid


def _zygote_main(control: socket.socket, work: Work, nice: int) -> None:
    # The worker owns the lifecycle: Ctrl-C or SIGTERM to the process group
    # must not end us while it drains; we end when it closes our socket.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps our children
    control.settimeout(None)
    while True:
        message, fds, _, _ = socket.recv_fds(control, 1, 1)
        if not message:
            return  # the worker closed its end, or died
        if not fds:
            continue
        pid = _fork("heavy child", control, _child_main, fds[0], work, nice)
        os.close(fds[0])
        control.sendall(_PID.pack(pid))


def _child_main(fd: int, work: Work, nice: int) -> None:
    sock = socket.socket(fileno=fd)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # Heavy work yields the CPU to everything interactive on the host (the
    # worker's loop, light jobs, the API, Redis) when cores are contended.
    os.nice(nice)
    while (head := recv_frame(sock)) is not None and (body := recv_frame(sock)) is not None:
        reply_head, reply_body = work(head, body)
        sock.sendall(frames_lead(reply_head, reply_body))  # the head and both lengths in one send
        sock.sendall(reply_body)
