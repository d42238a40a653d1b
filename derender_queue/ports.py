"""Listening ports another process holds: found before the slow start-up (a
worker loads its models for seconds first) and said in one line that names
the setting to change, instead of a traceback once the model is loaded."""

from __future__ import annotations

import errno
import socket


def bind_error(host: str, port: int) -> OSError | None:
    """Why a server could not listen on `host:port` now (None: it could),
    tried as servers bind (SO_REUSEADDR: a port in TIME_WAIT is free)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:  # socket.gaierror too: a host that does not resolve
        return exc
    return None


def cannot_listen(what: str, host: str, port: int, error: OSError, setting: str) -> str:
    """The one line: `what` (the HTTP port, the metrics port) could not be
    had, and `setting` (its flag and variable) chooses another."""
    if error.errno == errno.EADDRINUSE:
        return (f"derender: {what} {host}:{port} is in use by another process (another derender on this "
                f"host?): choose a free one with {setting}")
    return f"derender: cannot listen on {what} {host}:{port} ({error.strerror or error}): set {setting}"


API_PORT = "--port or DERENDER_PORT (--host or DERENDER_HOST for the address)"
METRICS_PORT = "--metrics-port or DERENDER_METRICS_PORT (0: no metrics port)"
