"""Engine-step derender: one job carries the next chunk of many streams.

An engine step produces, for every running request, its new token ids (and
logprobs); the generate stage sends them as one body instead of one job per
stream, so the queue's fixed per-job cost (claim, lease, result, notification)
is paid once per step, not once per stream.

    {"endpoint": "chat"|"completion", "model": ..., "items": [<streaming chunk body>, ...]}
 -> {"results": [{"chunk": ..., "stream_state": ...} | {"error": {...}, "status": 400}, ...]}

Each item is exactly a per-chunk body (`"stream": true`, `generate_chunk`,
`stream_state`, `chat_request`/`completion_request`, ...) and its result is
exactly that chunk's answer, or its error in vLLM's shape with its HTTP status:
a bad item fails alone. The envelope itself (not an object, an unknown field,
no items, too many) fails the whole step.

One endpoint per step: an item is the per-chunk body as it is today (the
endpoint is the path there, not a field), and a producer whose engine step
mixes chat and completion streams sends two steps (one per endpoint); they
run in parallel on any workers.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta, Raw, Struct

from .error_shape import ErrorInfo
from .types import Endpoint

STEP_MAX_ITEMS = 1024
"""Items one step may carry (a 400 beyond): the running requests of an engine
step are bounded by its batch size; the body-size limit applies as well."""


class DerenderStepRequest(Struct, kw_only=True, forbid_unknown_fields=True):
    """`POST /v1/derender/step` (job kind `step`)."""

    model: str | None = None
    """Served model of every item (an item naming another model is a 400 for it)."""
    endpoint: Endpoint
    items: Annotated[list[Raw], Meta(max_length=STEP_MAX_ITEMS)]
    """Each a streaming chunk body, decoded on its own so a bad one fails alone."""


class StepItemError(Struct):
    """An item's failure: vLLM's error shape plus the status its own call would answer."""

    error: ErrorInfo
    status: int
