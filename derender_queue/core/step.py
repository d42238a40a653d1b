"""Engine-step derender (contract/step_requests.py): many streams' chunks in one call.

Each item is decoded and derendered exactly as a per-chunk body is
(stream.py), so its answer has the same bytes; what a step shares is the
envelope's decode, the model lookup, the per-options memo (stream.py's
`_Run`), and one response written by joining the items' bytes. A failing
item becomes its own `{"error": ..., "status": ...}` entry and the others go on.

Items are independent (each carries its stream's signed state), so a step
can also be derendered as shares: `share=(i, k)` derenders the i-th of k
contiguous ranges of its items, and `join_shares` puts the k answers back
together, byte for byte the whole step's answer. A worker with idle heavy
children runs the shares side by side (worker/cpu_pool.py).
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import msgspec

from derender_queue.contract.error_shape import error_info
from derender_queue.contract.step_requests import DerenderStepRequest, StepItemError
from derender_queue.errors import DerenderError, bad_request

from .body import invalid
from .models import Model, ModelRegistry
from .parsers.spill import HeldTextNeeded
from .stream import StreamDerenderer, StreamRendered

log = logging.getLogger("derender.core")
_step_decoder = msgspec.json.Decoder(DerenderStepRequest)
_encoder = msgspec.json.Encoder()
_OPEN, _CLOSE = b'{"results":[', b"]}"


WHOLE_STEP = (0, 1)
"""The share that is the whole step."""


class Rendered(NamedTuple):
    """A derendered body (a step's, or any job's: derenderer.py)."""

    body: bytes
    model: str
    completion_tokens: int


def derender_step(stream: StreamDerenderer, registry: ModelRegistry, body: bytes, model: str | None,
                  share: tuple[int, int] = WHOLE_STEP) -> Rendered:
    """The items of a step body (those of `share`); `model` overrides the
    step's. A bad envelope raises DerenderError (the whole step fails); a
    bad item does not."""
    step = _decode_step(body)
    name = model or step.model
    loaded = registry.get(name)
    served = name or loaded.name
    serve = _serve_chat if step.endpoint == "chat" else _serve_completion
    parts: list[bytes] = []
    tokens = 0
    start, stop = share_range(len(step.items), share)
    needed = False
    for position, raw in enumerate(step.items[start:stop], start):
        try:
            rendered = serve(stream, bytes(raw), loaded, served)
        except HeldTextNeeded:  # the other items go on, so one fetch serves every item's needs
            needed = True
            continue
        except DerenderError as exc:
            parts.append(_item_error(exc.status, exc.message, exc.param))
            continue
        except Exception:  # a bug in one item must not fail its neighbours
            log.exception("step item %d failed", position)
            parts.append(_item_error(500, "internal error while derendering this item", None))
            continue
        parts.append(rendered.body)
        tokens += rendered.completion_tokens
    if needed:
        raise HeldTextNeeded
    return Rendered(_OPEN + b",".join(parts) + _CLOSE, loaded.name, tokens)


def share_range(items: int, share: tuple[int, int]) -> tuple[int, int]:
    """[start, stop) of the i-th of k contiguous, near-equal shares of `items`."""
    index, count = share
    if not 0 <= index < count:
        raise ValueError(f"no share {index} of {count}")
    return items * index // count, items * (index + 1) // count


def join_shares(bodies: list[bytes | bytearray]) -> bytes:
    """The whole step's answer from its shares' answers, in share order
    (one copy: each share's items are joined as views of its answer)."""
    pieces: list[bytes | memoryview] = [_OPEN]
    for body in bodies:
        items = memoryview(body)[len(_OPEN):len(body) - len(_CLOSE)]
        if items:
            pieces += [b",", items] if len(pieces) > 1 else [items]
    pieces.append(_CLOSE)
    return b"".join(pieces)


def _decode_step(body: bytes) -> DerenderStepRequest:
    try:
        return _step_decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise invalid(exc, "Invalid step request") from None
    except msgspec.DecodeError as exc:
        raise bad_request(f"Invalid JSON body: {exc}") from None
    except RecursionError:
        raise bad_request("Invalid request: JSON is nested too deeply") from None


def _serve_chat(stream: StreamDerenderer, raw: bytes, model: Model, served: str) -> StreamRendered:
    request, options_key = stream.chunks.chat(raw)
    _check_model(request.model, served)
    return stream.chat(request, model, served, options_key)


def _serve_completion(stream: StreamDerenderer, raw: bytes, model: Model, served: str) -> StreamRendered:
    request, options_key = stream.chunks.completion(raw)
    _check_model(request.model, served)
    return stream.completion(request, model, served, options_key)


def _check_model(named: str | None, served: str) -> None:
    """Every item runs on the step's model: one naming another is refused
    rather than silently served by the wrong tokenizer."""
    if named is not None and named != served:
        raise bad_request(f"item names model `{named}`, but this step is for `{served}`", param="model")


def _item_error(status: int, message: str, param: str | None) -> bytes:
    return _encoder.encode(StepItemError(error_info(status, message, param), status))
