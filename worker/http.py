"""The worker's own HTTP port: `/metrics` for Prometheus and `/health` for
liveness probes.

`/health` is answered by a thread, so it asks the process's `Liveness`
(worker/liveness.py) rather than itself: 503 with the reasons once the event
loop is wedged or a model's job loop has ended or stopped making progress
(such a process could not pick, finish or heartbeat jobs).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from derender_queue.ports import METRICS_PORT, cannot_listen
from worker.liveness import Liveness

METRICS_ADDR = "0.0.0.0"


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def health_app(metrics_app: WSGIApp, liveness: Liveness) -> WSGIApp:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/health":
            problems = liveness.problems()
            status = "503 Service Unavailable" if problems else "200 OK"
            start_response(status, [("Content-Type", "application/json")])
            body = {"status": "unhealthy", "problems": problems} if problems else {"status": "ok"}
            return [json.dumps(body).encode()]
        return metrics_app(environ, start_response)

    return app


def serve_metrics_and_health(port: int, liveness: Liveness, addr: str = METRICS_ADDR) -> None:
    """Serve the port from a thread; SystemExit with one line if it cannot be
    had (taken since the start-up check: derender_queue/ports.py)."""
    try:
        httpd = make_server(addr, port, health_app(make_wsgi_app(), liveness), ThreadingWSGIServer,
                            handler_class=_Quiet)
    except OSError as exc:
        raise SystemExit(cannot_listen("the metrics port", addr, port, exc, METRICS_PORT)) from None
    threading.Thread(target=httpd.serve_forever, daemon=True, name="metrics").start()
