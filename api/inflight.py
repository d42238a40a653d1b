"""Bytes in flight: a budget over the request and response bytes the API holds.

Every request body is admitted against `DERENDER_MAX_INFLIGHT_BYTES` (all
requests of this process) and `DERENDER_MAX_INFLIGHT_BYTES_PER_KEY` (one API
key's) before it is read: its declared `Content-Length` up front, a chunked
body chunk by chunk. Beyond either, the answer is 503 + `Retry-After` (429
stays the answer to a full queue). A request alone in flight is always
admitted, so a body larger than the budget is slow, never refused for ever.
Response bytes (the worker's result) are counted too, but never refused: the
work is done by then. Everything a request took is given back when its
response has been sent (`InflightMiddleware`).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from derender_queue.errors import DerenderError

from . import memory, metrics


@dataclass
class InflightBudget:
    limit: int = 0
    """All requests of this process; 0: no limit."""
    per_key: int = 0
    """One API key's requests; 0: no limit."""
    total: int = 0
    by_key: Counter[str] = field(default_factory=Counter)

    def refusal(self, key: str, size: int, mine: int, mine_for_key: int) -> str | None:
        """Why `size` more bytes cannot be taken now (None: they can). `mine`
        is what the asking request already holds: alone, it is admitted."""
        if self.limit and self.total > mine and self.total + size > self.limit:
            return "inflight_bytes"
        held = self.by_key[key]
        if self.per_key and held > mine_for_key and held + size > self.per_key:
            return "key_inflight_bytes"
        return None

    def room(self, key: str, size: int, share: float = 1.0) -> bool:
        """Whether `size` more bytes fit in `share` of both limits, whoever holds the rest."""
        fits_total = not self.limit or self.total + size <= self.limit * share
        return fits_total and (not self.per_key or self.by_key[key] + size <= self.per_key * share)

    def add(self, key: str, size: int) -> None:
        self.total += size
        self.by_key[key] += size
        metrics.INFLIGHT_BYTES.set(self.total)

    def remove(self, key: str, size: int) -> None:
        self.total -= size
        self.by_key[key] -= size
        if self.by_key[key] <= 0:
            del self.by_key[key]
        metrics.INFLIGHT_BYTES.set(self.total)


class Ledger:
    """One request's share of the budget."""

    def __init__(self, budget: InflightBudget) -> None:
        self.budget = budget
        self.held: Counter[str] = Counter()

    def take(self, size: int, key: str) -> None:
        """Hold `size` bytes of a request body, or refuse with a 503."""
        reason = self.budget.refusal(key, size, self.held.total(), self.held[key])
        if reason is not None:
            metrics.REJECTED.labels(reason).inc()
            whose = "this API key's" if reason == "key_inflight_bytes" else "the server's"
            raise DerenderError(f"too many request bytes in flight ({whose} limit); retry shortly", status=503)
        self.force(size, key)

    def force(self, size: int, key: str) -> None:
        """Hold bytes that cannot be refused (a finished job's result)."""
        self.held[key] += size
        self.budget.add(key, size)

    def give_back(self, size: int, key: str) -> None:
        """Give back part of what this request holds (a streamed chunk answered)."""
        size = min(size, self.held[key])
        self.held[key] -= size
        self.budget.remove(key, size)

    def release(self) -> int:
        released = self.held.total()
        for key, size in self.held.items():
            self.budget.remove(key, size)
        self.held.clear()
        return released


READ_AHEAD_SHARE = 0.5
"""The part of the budget that streams may fill by reading ahead."""


class StreamBytes:
    """A streamed body's bytes in the budget (the SSE route): taken as they
    arrive, given back once the chunk whose line they end with is answered.
    Offsets count the body's bytes: `queued` is the end of the last chunk
    handed on to be answered, `freed` what was given back. The bytes of
    chunks handed on come back by themselves, so while there are any the
    reader only reads ahead, and takes more only while the budget stays at
    most half full (READ_AHEAD_SHARE), else it waits for them: reading ahead
    never takes the budget past its limit (nor a stream alone past it), and
    leaves the other half to chunks being answered and other bodies. With
    none, the next chunk is needed: it is taken as any body, a 503 beyond
    the budget unless this request is alone in it."""

    def __init__(self, ledger: Ledger, key: str) -> None:
        self.ledger, self.key = ledger, key
        self.queued = self.freed = 0
        self.freed_at = 0.0
        """When a chunk was last answered (time.monotonic)."""
        self._freed = asyncio.Event()

    async def take(self, size: int) -> None:
        while self.queued > self.freed and not self.ledger.budget.room(self.key, size, READ_AHEAD_SHARE):
            self._freed.clear()
            await self._freed.wait()
        if self.queued > self.freed:
            self.ledger.force(size, self.key)
        else:
            self.ledger.take(size, self.key)

    def free_to(self, offset: int) -> None:
        """The chunk whose line ends at `offset` was answered: give back what came before it."""
        if offset > self.freed:
            self.ledger.give_back(offset - self.freed, self.key)
            self.freed, self.freed_at = offset, time.monotonic()
            self._freed.set()


def ledger(request: Request) -> Ledger:
    """The request's ledger (a fresh, unbudgeted one outside the middleware)."""
    found = request.scope.get("state", {}).get("ledger")
    return found if isinstance(found, Ledger) else Ledger(InflightBudget())


class InflightMiddleware:
    """Gives a request's bytes back once its response is sent, and lets the
    allocator return large freed buffers to the OS. The budget is the app's
    (`app.state.api.budget`, made at start-up)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        api = getattr(getattr(scope.get("app"), "state", None), "api", None)
        if scope["type"] != "http" or api is None:
            await self.app(scope, receive, send)
            return
        budget: InflightBudget = api.budget
        held = Ledger(budget)
        scope.setdefault("state", {})["ledger"] = held
        try:
            await self.app(scope, receive, send)
        finally:
            memory.released(held.release(), budget.total)
