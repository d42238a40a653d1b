"""Public path for streaming producers (README): `derender_queue.streaming.derender_stream`.

The helper lives in the wire layer (`derender_queue.wire.streaming`); this module keeps the
documented import path working.
"""

from derender_queue.wire.streaming import derender_stream, parse_sse

__all__ = ["derender_stream", "parse_sse"]
