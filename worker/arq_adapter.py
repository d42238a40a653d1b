"""The one module that touches arq's internals (checked against arq 0.28.0).

`ArqWorker.release_slot()` is arq's `_release_sem_dec_counter_on_complete`:
give back the concurrency slot a started job took (worker/lane_server.py
takes arq's semaphore and counter for each light job it claims).
"""

from __future__ import annotations

from arq.worker import Worker, func

ARQ_VERSION_CHECKED = "0.28.0"
__all__ = ["ARQ_VERSION_CHECKED", "ArqWorker", "func"]


class ArqWorker(Worker):
    """arq's Worker with the internals we use under names of their own."""

    def release_slot(self) -> None:
        self._release_sem_dec_counter_on_complete()
