"""What this API process saw over the last minute, for the status page: per
second, the synchronous derender requests it answered, their errors and a
latency histogram; and each client's last error answers (time, route,
status, message, job id; never a body), which the page shows only to that
client and to operators (api/status_page.py).

Memory is bounded whatever the load: 60 one-second slots of fixed-size
histograms and a ring of `MAX_ERRORS` entries per client (clients are the
configured API keys, or "public").
"""

from __future__ import annotations

import bisect
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

WINDOW_S = 60
MAX_ERRORS = 10
MAX_MESSAGE = 300
_BOUNDS = tuple(1e-4 * 2 ** (i / 4) for i in range(81))
"""Latency bucket upper bounds, 0.1 ms to ~105 s, each 19% above the last."""


class RecentError(msgspec.Struct):
    status: int
    message: str
    job_id: str | None
    time_ms: int
    route: str
    client: str
    """The API key's name (or "public") whose request this was."""


class Second(msgspec.Struct):
    """One second of the window: requests answered, errors among them, latency."""

    t: int
    """Unix second."""
    requests: int
    errors: int
    p50_ms: float | None
    p99_ms: float | None


@dataclass
class _Slot:
    t: int = -1
    requests: int = 0
    errors: int = 0
    hist: list[int] = field(default_factory=lambda: [0] * (len(_BOUNDS) + 1))


def _quantile_ms(hist: list[int], total: int, q: float) -> float | None:
    """The geometric middle of the bucket holding the q-quantile."""
    if not total:
        return None
    rank, seen = math.ceil(q * total), 0
    for i, n in enumerate(hist):
        seen += n
        if seen >= rank:
            hi = _BOUNDS[min(i, len(_BOUNDS) - 1)]
            lo = _BOUNDS[i - 1] if 0 < i < len(_BOUNDS) else hi
            return round(math.sqrt(lo * hi) * 1000, 2)
    return None  # unreachable: the counts sum to total


class Recent:
    """One API process's last `WINDOW_S` seconds; `clock` is injectable for tests."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.slots = [_Slot() for _ in range(WINDOW_S)]
        self._errors: dict[str, deque[RecentError]] = {}

    def observe(self, latency_s: float, status: int) -> None:
        now = int(self.clock())
        slot = self.slots[now % WINDOW_S]
        if slot.t != now:
            slot = self.slots[now % WINDOW_S] = _Slot(now)
        slot.requests += 1
        slot.errors += status >= 400
        slot.hist[bisect.bisect_left(_BOUNDS, latency_s)] += 1

    def error(self, status: int, message: str, job_id: str | None, route: str, client: str) -> None:
        ring = self._errors.setdefault(client, deque(maxlen=MAX_ERRORS))
        ring.append(RecentError(status, message[:MAX_MESSAGE], job_id, int(self.clock() * 1000), route, client))

    def errors(self, client: str | None = None) -> list[RecentError]:
        """Newest first: `client`'s last errors, or (None) everyone's last `MAX_ERRORS`."""
        rings = [self._errors.get(client, ())] if client is not None else list(self._errors.values())
        merged = sorted((e for ring in rings for e in ring), key=lambda e: e.time_ms, reverse=True)
        return merged[:MAX_ERRORS]

    def seconds(self) -> list[Second]:
        """The last `WINDOW_S` whole seconds, oldest first (empty ones as zeros)."""
        now = int(self.clock())
        out = []
        for t in range(now - WINDOW_S, now):
            slot = self.slots[t % WINDOW_S]
            if slot.t != t:
                slot = _Slot(t)  # nothing that second
            out.append(Second(t, slot.requests, slot.errors, _quantile_ms(slot.hist, slot.requests, 0.5),
                              _quantile_ms(slot.hist, slot.requests, 0.99)))
        return out

    def minute(self) -> tuple[int, float | None, float | None]:
        """Requests, p50 and p99 ms over the whole window."""
        now, total, hist = int(self.clock()), 0, [0] * (len(_BOUNDS) + 1)
        for slot in self.slots:
            if now - WINDOW_S <= slot.t < now:
                total += slot.requests
                hist = [a + b for a, b in zip(hist, slot.hist, strict=True)]
        return total, _quantile_ms(hist, total, 0.5), _quantile_ms(hist, total, 0.99)
