"""The model a request body names, read from its head when it can be.

The API and `DerenderClient` route a body by its `model` before any worker
parses it. When `model` is the body's first member (after an optional
`"stream": true|false`, as OpenAI clients write them), its first 4 KiB
suffice; otherwise the whole body is scanned (msgspec).
`requested_model` is the check the API and `derender batch` make before
they enqueue: the one source of their words for a body that is not a JSON
object or names no readable model.
"""

from __future__ import annotations

import json
import re

import msgspec

from derender_queue.errors import DerenderError, bad_request

_HEAD = re.compile(
    rb'\s*\{\s*(?:"stream"\s*:\s*(?:true|false)\s*,\s*)?"model"\s*:\s*(null|"(?:[^"\\]|\\.)*")\s*[,}]'
)


class _ModelOnly(msgspec.Struct):
    model: str | None = None


_model_only = msgspec.json.Decoder(_ModelOnly)


def model_named(body: bytes) -> str | None:
    """The body's top-level `model` (None when it names none or null).
    Raises msgspec.DecodeError (not JSON; for a head match, a bad escape in
    the name) or ValidationError (a `model` that is not a string)."""
    head = _HEAD.match(body, 0, 4096)
    if head is not None:
        return msgspec.json.decode(head.group(1), type=str | None)  # a JSON string, or null
    return _model_only.decode(body).model


def requested_model(body: bytes) -> str | None:
    """The body's top-level `model`, after checking it is a JSON object; a
    400 DerenderError saying what is wrong otherwise."""
    if not _is_object(body):
        raise _not_an_object(body)
    try:
        return _checked(model_named(body))
    except msgspec.ValidationError as exc:
        raise bad_request(f"Invalid request: {exc}") from None
    except RecursionError as exc:
        raise bad_request(f"Invalid JSON body: {exc}") from None
    except msgspec.DecodeError as exc:
        if b"Infinity" not in body and b"NaN" not in body:
            raise bad_request(f"Invalid JSON body: {exc}") from None
    return _model_the_stdlib_way(body)


def _is_object(body: bytes) -> bool:
    """Starts with `{` and ends with `}`, whitespace aside, without copying
    the body (`bytes.strip` would)."""
    first, last = bytes(body[:4096]).lstrip(), bytes(body[-4096:]).rstrip()
    if not first or not last:  # kilobytes of whitespace: rare enough to copy
        first = last = bytes(body).strip()
    return first.startswith(b"{") and last.endswith(b"}")


def _not_an_object(body: bytes) -> DerenderError:
    """What is wrong with a body that is not `{...}`, in the words the
    worker's decode uses: not JSON (truncated, say), or JSON of another type."""
    try:
        _model_only.decode(body)
    except msgspec.ValidationError as exc:  # "Expected `object`, got `array`"
        return bad_request(f"Invalid request: {exc}")
    except (msgspec.DecodeError, RecursionError) as exc:
        return bad_request(f"Invalid JSON body: {exc}")
    return bad_request("Invalid JSON body: not a JSON object")


def _model_the_stdlib_way(body: bytes) -> str | None:
    """Python's JSON constants (-Infinity from a Python generate stage): rare
    and slow, but the model must be right, so read it the stdlib's way."""
    try:
        data = json.loads(body, parse_constant=float)
    except (ValueError, RecursionError) as exc:
        raise bad_request(f"Invalid JSON body: {exc}") from None
    model = data.get("model") if isinstance(data, dict) else None
    if model is not None and not isinstance(model, str):
        raise bad_request("Invalid request: `model` must be a string", param="model")
    return _checked(model)


def _checked(model: str | None) -> str | None:
    """A model name that can be echoed in an error: valid Unicode text (the
    stdlib decodes a lone `\\ud800` escape into a surrogate)."""
    if model is not None:
        try:
            model.encode("utf-8")
        except UnicodeEncodeError:
            raise bad_request("Invalid JSON body: `model` is not valid Unicode", param="model") from None
    return model
