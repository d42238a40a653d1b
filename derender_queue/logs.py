"""Structured JSON logs: one object per line, with the job and request ids.

Any `extra={"job_id": ..., "request_id": ..., "traceparent": ...}` passed to a
log call becomes a field, so every line about a job can be found by its id.
"""

from __future__ import annotations

import json
import logging
import sys
import time

_FIELDS = ("job_id", "request_id", "traceparent", "model", "status", "ms", "tokens", "worker", "endpoint")
FIELD_CHARS = 200
"""Fields a producer chooses (a job id on a raw producer's lane, a request id
header) are cut to this: a megabyte id is not a megabyte log line."""


def _bounded(value: object) -> object:
    if isinstance(value, str) and len(value) > FIELD_CHARS:
        return f"{value[:FIELD_CHARS]}...({len(value)} chars)"
    return value


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for field in _FIELDS:
            value = getattr(record, field, None)
            if value is not None:
                entry[field] = _bounded(value)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # arq logs a line per job at INFO; ours carry the ids instead.
    logging.getLogger("arq").setLevel(max(logging.WARNING, root.level))
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)


def trace_fields(trace: dict[str, str] | None) -> dict[str, str]:
    """Log fields for a job's trace headers."""
    if not trace:
        return {}
    out = {}
    if "x-request-id" in trace:
        out["request_id"] = trace["x-request-id"]
    if "traceparent" in trace:
        out["traceparent"] = trace["traceparent"]
    return out
