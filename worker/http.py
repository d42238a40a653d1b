"""The worker's own HTTP port: `/metrics` for Prometheus and `/health` for
liveness probes.

`/health` is answered by a thread, so it checks the event loop rather than
itself: unhealthy once the loop's lag sampler has not ticked for
`STALL_S` (a wedged loop cannot pick, finish or heartbeat jobs).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

STALL_S = 10.0
_last_tick = time.monotonic()


def loop_ticked() -> None:
    global _last_tick
    _last_tick = time.monotonic()


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _app(metrics_app: WSGIApp) -> WSGIApp:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/health":
            stalled = time.monotonic() - _last_tick
            ok = stalled < STALL_S
            start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "application/json")])
            return [b'{"status":"ok"}' if ok else b'{"status":"event loop stalled %.0fs"}' % stalled]
        return metrics_app(environ, start_response)

    return app


def serve_metrics_and_health(port: int, addr: str = "0.0.0.0") -> None:
    httpd = make_server(addr, port, _app(make_wsgi_app()), ThreadingWSGIServer, handler_class=_Quiet)
    threading.Thread(target=httpd.serve_forever, daemon=True, name="metrics").start()
