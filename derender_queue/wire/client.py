"""A small async client for Python producers that skip HTTP and use Redis directly.

    async with DerenderClient("redis://127.0.0.1:6379/0") as client:
        response = await client.derender_chat({"generate_response": {...}})
        job_id = await client.submit("completion", body_bytes)
        result = await client.wait(job_id)          # Result(status, body, envelope)

Errors come back as `DerenderError` (vLLM's message and status), exactly as
the HTTP API would answer them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
from redis.asyncio import Redis

from derender_queue.contract import DerenderChatRequest, Endpoint
from derender_queue.errors import DerenderError

from .connection import async_client, sibling_client
from .envelope import ResultEnvelope
from .keys import Keys, new_job_id, now_ms
from .queue import JobQueue
from .replication import MASTER_ONLY, Durability
from .waiter import ResultWaiter

DEFAULT_MODEL = "deepseek-v4"


@dataclass(frozen=True)
class Result:
    status: int
    body: bytes
    envelope: ResultEnvelope

    def json(self) -> Any:
        return msgspec.json.decode(self.body)


class _ModelOnly(msgspec.Struct):
    model: str | None = None


class DerenderClient:
    def __init__(
        self, redis_url: str = "redis://127.0.0.1:6379/0", *, key_prefix: str = "derender",
        default_model: str = DEFAULT_MODEL, redis: Redis | None = None, durability: Durability = MASTER_ONLY,
    ) -> None:
        # `redis_url` may name a Sentinel-managed master (wire/connection.py);
        # `durability`: replicas a submit waits for (NotReplicated if too few).
        self.redis = redis or async_client(redis_url)
        self._listener = redis or sibling_client(self.redis)
        self.keys = Keys(key_prefix)
        self.queue = JobQueue(self.redis, self.keys, durability=durability)
        self.waiter = ResultWaiter(self._listener, self.keys)
        self.default_model = default_model
        self._started = False

    async def __aenter__(self) -> DerenderClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        if not self._started:
            await self.waiter.start()
            self._started = True

    async def close(self) -> None:
        await self.waiter.close()
        await self.redis.aclose()
        if self._listener is not self.redis:
            await self._listener.aclose()

    async def submit(
        self, endpoint: Endpoint, body: bytes | dict[str, Any], model: str | None = None, *,
        deadline_s: float | None = None, notify: bool = True,
    ) -> str:
        """Enqueue a derender body; returns the job id. `notify` lets `wait`
        wake on the worker's notification instead of polling."""
        await self.start()
        raw = body if isinstance(body, bytes) else msgspec.json.encode(body)
        if model is None:
            model = msgspec.json.decode(raw, type=_ModelOnly).model or self.default_model
        job_id = new_job_id()
        if notify:
            self.waiter.expect(job_id)
        deadline = None if deadline_s is None else now_ms() + int(deadline_s * 1000)
        try:
            return await self.queue.submit(
                endpoint, raw, model, job_id=job_id, reply_to=self.waiter.reply_to if notify else None,
                deadline_ms=deadline,
            )
        except BaseException:
            self.waiter.forget(job_id)
            raise

    async def wait(self, job_id: str, timeout: float = 30.0) -> Result:
        """The finished job's result (consumed); TimeoutError if none in time."""
        result = await self.waiter.wait(self.queue, job_id, timeout)
        if result is None:
            raise TimeoutError(f"no result for job {job_id} within {timeout:g} s")
        envelope, body = result
        return Result(envelope.status, body, envelope)

    async def derender(self, endpoint: Endpoint, body: bytes | dict[str, Any], model: str | None = None,
                       timeout: float = 30.0) -> dict[str, Any]:
        job_id = await self.submit(endpoint, body, model, deadline_s=timeout)
        result = await self.wait(job_id, timeout)
        response: dict[str, Any] = result.json()
        if result.status != 200:
            error = response.get("error", {})
            raise DerenderError(error.get("message", "derender failed"), result.status, error.get("param"))
        return response

    async def derender_chat(self, body: bytes | dict[str, Any] | DerenderChatRequest, model: str | None = None,
                            timeout: float = 30.0) -> dict[str, Any]:
        if isinstance(body, msgspec.Struct):
            body = msgspec.json.encode(body)
        return await self.derender("chat", body, model, timeout)

    async def derender_completion(self, body: bytes | dict[str, Any], model: str | None = None,
                                  timeout: float = 30.0) -> dict[str, Any]:
        return await self.derender("completion", body, model, timeout)
