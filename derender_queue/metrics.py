"""Metrics both the API and workers export (one registry when `derender run`
hosts both in one process)."""

from __future__ import annotations

from prometheus_client import Gauge

QUEUE_DEPTH = Gauge("derender_queue_depth", "Jobs waiting in a model's queue.", ["model"])
