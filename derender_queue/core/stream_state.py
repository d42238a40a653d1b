"""The state a streaming derender hands the client, and takes back signed.

Wire form: `{"opaque": base64url(msgpack(ChoiceState) || tag)}`, where
`tag` is the first 16 bytes of HMAC-SHA256(secret, domain || binding ||
payload). The binding is the endpoint, the served model, the generate
`request_id` and the request's options (chat_request / completion_request as
encoded), each length-prefixed; the choice index is inside the payload and
must match the chunk's. So a forged, truncated or edited state, or one
issued for another request, model, endpoint, options or choice, is a 400,
never decoded. Retrying a chunk with the same state is fine (nothing about a
stream is kept server-side but held text past 512 characters, which a retry
writes again at the same offsets: core/parsers/spill.py).

What bounds the state (nothing in it grows with the number of chunks):

* the decode window: the ids since the last complete character, at most
  vLLM's 5-token prefix window plus the pieces of one character (a run of
  bytes that never forms a character keeps growing it, as in vLLM);
* at most one held id, the `min_tokens` count, a few counters and flags,
  the last 4 sampled ids (logprob repair context); for completion logprobs
  on non-ByteLevel vocabularies a second decode window of the same bound
  (the one `text_offset` is read from);
* held text: shorter than the longest stop string (see stream_text.py for
  the one exception, a stop string the generate stage did not stop on);
* completion logprob entries of that held text, whose offsets are not known
  yet (resolved: spelling, logprob, candidates);
* the parser's `to_state()` (see derender_queue/core/parsers/__init__.py: a
  marker prefix, open whitespace, the tool call being parsed, and the text
  vLLM's rules only decide at the end: past 512 characters, a reference to
  the worker's store and the last characters; core/parsers/spill.py).

All of it is also bounded by `max_model_len`, which every chunk checks.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import secrets
from typing import Any, NamedTuple

import msgspec

from derender_queue.errors import DerenderError, bad_request

from .stream_text import TextState

# Part of every tag: bump it when ChoiceState (or TextState) changes shape,
# so states from an older deployment are refused, never misread.
_VERSION = b"derender-queue stream v1\x00"
_TAG = 16
_OTHER_SHAPE = (
    "stream_state holds a parser state of another shape than this version's parser for this model "
    "(it was issued before an upgrade): start the stream again"
)
_INVALID = (
    "stream_state is not valid for this request: it was altered, truncated, or issued "
    "for another request, choice, model, endpoint or request options"
)


class HeldLogprobs(msgspec.Struct, array_like=True):
    """Completion logprob entries waiting for their text (parallel lists)."""

    tokens: list[str]
    logprobs: list[float | None]
    tops: list[dict[str, float] | None]
    starts: list[int]
    """Character offset each entry starts at, before the final clamp."""


class ChoiceState(msgspec.Struct, array_like=True):
    """Everything one choice carries between chunks (see the module docstring)."""

    index: int | None = None
    """The choice this is for; None until the first chunk with a choice."""
    text: TextState = msgspec.field(default_factory=TextState)
    role_sent: bool = False
    content_sent: bool = False
    """Content or the final chunk went out. No longer read (a chunk without
    text carries `content: null`, as vLLM's); still set, so a state is the
    same bytes as before."""
    calls: bool = False
    """A tool call delta went out (finish_reason becomes tool_calls)."""
    done: bool = False
    context: list[int] = msgspec.field(default_factory=list)
    lead_count: int = 0
    """Completion logprobs: characters started by the logprob tokens so far."""
    held_logprobs: HeldLogprobs | None = None
    parser: dict[str, Any] | None = None
    """The parser's `to_state()`, less what a fresh parser has (`compact`)."""
    owed: int = 0
    """The UTF-8 sequence open at `lead_count` (ByteLevel vocabularies;
    `core/utf8.py`: a plain count of continuation bytes from older states
    reads the same). This and the fields below come last, so a state issued
    before they were added still decodes."""
    offset_window: list[int] | None = None
    offset_prefix: int = 0
    offset_read: int = 0
    """Other vocabularies: the decode window the logprob tokens' offsets
    are read from (`emission_offsets`; None until the first logprobs)."""


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(ChoiceState).decode
_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")
_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")


class Keyed(NamedTuple):
    """HMAC-SHA256 as its two hash states (RFC 2104: H(key^opad || H(key^ipad
    || message))), keyed once and copied per tag: the same bytes as `hmac`,
    at three quarters of its cost here (`hmac`'s digest copies its whole
    context again), paid twice a chunk."""

    inner: Any
    outer: Any


_IPAD = bytes(b ^ 0x36 for b in range(256))
_OPAD = bytes(b ^ 0x5C for b in range(256))
_BLOCK = hashlib.sha256().block_size


def _hmac_pads(key: bytes) -> tuple[Any, Any]:
    """SHA-256 states with HMAC's inner and outer key blocks absorbed."""
    if len(key) > _BLOCK:
        key = hashlib.sha256(key).digest()
    block = key.ljust(_BLOCK, b"\0")
    return hashlib.sha256(block.translate(_IPAD)), hashlib.sha256(block.translate(_OPAD))


class StateCodec:
    """Signs and checks states with one secret (shared by all workers)."""

    def __init__(self, secret: bytes | None = None) -> None:
        # A per-process secret only works while one process serves the
        # whole stream (CLI, tests); workers are given a shared one.
        key = secret if secret is not None else secrets.token_bytes(32)
        self._keyed = Keyed(*_hmac_pads(key))
        self._keyed.inner.update(_VERSION)

    def keyed(self, binding: bytes) -> Keyed:
        """The tag's HMAC with a run's `binding` (all but the request id)
        absorbed once: each tag copies it and adds only the request id and
        the payload. (A request's options are most of the binding: hundreds
        of bytes, thousands with tools, hashed twice a chunk otherwise.)"""
        inner = self._keyed.inner.copy()
        inner.update(binding)
        return Keyed(inner, self._keyed.outer)

    def seal(self, state: ChoiceState, keyed: Keyed, request: bytes) -> str:
        """`keyed` from `keyed()`, `request` from `bind_request`."""
        payload = _encode(state)
        # base64url without padding (base64.urlsafe_b64encode's bytes, minus its Python layers)
        data = binascii.b2a_base64(payload + _tag(keyed, request, payload), newline=False)
        return data.translate(_TO_URLSAFE).rstrip(b"=").decode("ascii")

    def open(self, opaque: str, keyed: Keyed, request: bytes) -> ChoiceState:
        """The state, or a 400 when it is not one we issued for this binding."""
        try:
            # as base64.urlsafe_b64decode: non-alphabet characters are skipped
            raw = binascii.a2b_base64((opaque + "=" * (-len(opaque) % 4)).encode("ascii").translate(_FROM_URLSAFE))
        except (binascii.Error, ValueError):  # UnicodeEncodeError is a ValueError
            raise _invalid() from None
        payload, tag = raw[:-_TAG], raw[-_TAG:]
        if len(raw) <= _TAG or not hmac.compare_digest(tag, _tag(keyed, request, payload)):
            raise _invalid()
        try:
            return _decode(payload)
        except msgspec.DecodeError:  # signed by us but unreadable: another version
            raise _invalid() from None


def options_bytes(options: msgspec.Struct | None) -> bytes:
    """The request's options as bound (and as the per-options memo's key)."""
    return b"" if options is None else _encode(options)


def binding(endpoint: str, model: str, options: bytes) -> bytes:
    """What a state is bound to, but for the request id, as unambiguous
    bytes (each part length-prefixed); `bind_request` adds the id."""
    return b"".join(_part(p) for p in (endpoint.encode(), model.encode(), options))


def bind_request(request_id: str | None) -> bytes:
    # \xff is never UTF-8: no request id binds like a missing one.
    return _part(b"\xff" if request_id is None else request_id.encode("utf-8", "surrogatepass"))


def _tag(keyed: Keyed, request: bytes, payload: bytes) -> bytes:
    inner = keyed.inner.copy()
    inner.update(request + payload)
    outer = keyed.outer.copy()
    outer.update(inner.digest())
    tag: bytes = outer.digest()[:_TAG]
    return tag


def _part(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def _invalid() -> DerenderError:
    return bad_request(_INVALID, param="stream_state")


def compact(state: Any, ref: Any) -> Any:
    """`state` without what equals `ref` (a fresh parser's `to_state()`):
    dicts keep only the keys whose values differ, recursively; a dict whose
    keys differ from the reference's is kept whole, wrapped in a list."""
    if type(ref) is not dict:
        return state
    if type(state) is not dict or state.keys() != ref.keys():
        return [state]
    out = {}
    for key, value in state.items():
        base = ref[key]
        if value != base:  # dicts compare in C: recursing only into those that differ is cheaper
            out[key] = compact(value, base) if type(base) is dict else value
    return out


def expand(diff: Any, ref: Any) -> Any:
    """The state `compact` made `diff` from (parsers copy what they keep).
    A key the reference lacks comes from a parser of another shape (a state
    issued before an upgrade changed it): a 400, never a misread state."""
    if type(ref) is not dict:
        return diff
    if type(diff) is list:
        return diff[0]
    if not diff:
        return ref
    out = dict(ref)  # the keys that equal the reference, copied at C speed
    for key, value in diff.items():
        if key not in out:  # `compact` writes no other key
            raise bad_request(_OTHER_SHAPE, param="stream_state")
        base = ref[key]
        out[key] = expand(value, base) if type(base) is dict else value
    return out
