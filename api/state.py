"""What every route of one API process shares: settings, Redis, the queue and
the result waiter, the configured model names (no tokenizer is loaded)."""

from __future__ import annotations

from dataclasses import dataclass, field

from redis.asyncio import Redis
from starlette.requests import Request

from derender_queue.errors import DerenderError
from derender_queue.settings import Settings
from derender_queue.wire.keys import Keys, now_ms
from derender_queue.wire.queue import JobQueue
from derender_queue.wire.waiter import ResultWaiter

from .admission import Admission
from .inflight import InflightBudget
from .owner import OwnerSeal
from .recent import Recent
from .workload import Totals


@dataclass
class ApiState:
    settings: Settings
    redis: Redis
    keys: Keys
    queue: JobQueue
    waiter: ResultWaiter
    model_names: list[str]
    """Served model names from the models config."""
    recent: Recent = field(default_factory=Recent)
    """The last minute of synchronous derenders and their errors (the status page)."""
    workload: Totals | None = None
    """What the workers did, summed at most once a second and reused until
    that second ends (the status page)."""
    started_ms: int = field(default_factory=now_ms)
    admission: Admission = field(init=False)
    budget: InflightBudget = field(init=False)
    """Request and response bytes held now (api/inflight.py)."""
    owners: OwnerSeal = field(init=False)
    api_keys: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.admission = Admission(self.settings.max_queue_depth, self.queue.depth)
        self.budget = InflightBudget(self.settings.max_inflight_bytes, self.settings.max_inflight_bytes_per_key)
        self.owners = OwnerSeal(self.redis, self.keys, self.settings.owner_secret)
        self.api_keys = self.settings.api_key_names()

    def resolve_model(self, name: str | None) -> str:
        """The configured model a request names (none: the first configured), or a 404."""
        if not name:
            return self.model_names[0]
        if name not in self.model_names:
            raise DerenderError(
                f"The model `{name}` does not exist. Valid aliases: {', '.join(self.model_names)}.",
                status=404, param="model",
            )
        return name


def api_state(request: Request) -> ApiState:
    state: ApiState = request.app.state.api
    return state
