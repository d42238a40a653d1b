"""Loops that wait on Redis never spin.

A loop could spin two ways: retrying at once after each error (Redis down, a
host that does not resolve), and a blocking command that answers "nothing"
before its block time is up (fakeredis's BLMOVE does: the embedded default's
claim loops once kept a core busy with no work). `Backoff` paces the first,
`blocked` the second.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")

RETRY_CAP_S = 2.0
"""The longest wait between two tries: Redis back, a loop finds it within this."""
EARLY_S = 0.01
"""A blocking command's empty answer this much before its block time is up came early."""


class Backoff:
    """Waits after consecutive failures: `first_s`, doubling up to `cap_s`,
    each within ±10% (workers that lost the same Redis do not come back in
    step); `reset()` after a success starts again at `first_s`."""

    def __init__(self, first_s: float, cap_s: float = RETRY_CAP_S) -> None:
        self.first_s, self.cap_s = first_s, max(cap_s, first_s)
        self.failures = 0

    def next_s(self) -> float:
        """The wait after one more failure (counted)."""
        delay = min(self.first_s * 2.0 ** min(self.failures, 32), self.cap_s)
        self.failures += 1
        return delay * random.uniform(0.9, 1.1)

    def reset(self) -> None:
        self.failures = 0

    async def wait(self) -> None:
        """Sleep the next wait."""
        await asyncio.sleep(self.next_s())


async def blocked(reply: Awaitable[T | None], block_s: float) -> T | None:
    """A blocking command's reply (BLMOVE, BRPOP). An empty one that came
    early has the rest of `block_s` waited out here, so a server whose
    blocking command does not block makes a slow poll, never a spin."""
    start = time.monotonic()
    value = await reply
    if value is None:
        left = block_s - (time.monotonic() - start)
        if left > EARLY_S:
            await asyncio.sleep(left)
    return value
