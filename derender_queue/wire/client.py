"""A small async client for Python producers that skip HTTP and use Redis directly.

    async with DerenderClient("redis://127.0.0.1:6379/0") as client:
        response = await client.derender_chat({"generate_response": {...}})
        job_id = await client.submit("completion", body_bytes)
        result = await client.wait(job_id)          # Result(status, body, envelope)
        results = await client.derender_step("chat", [chunk_body, ...])  # one engine step

Errors come back as `DerenderError` (vLLM's message and status), exactly as
the HTTP API would answer them.

The default model is the API's: the first model of the models config (the
`models_config` argument, else `DERENDER_MODELS_CONFIG`, else the built-in
`deepseek-v4`), read without loading a tokenizer. `derender*()` for a model no
live worker serves fails at once with a 503 instead of waiting for its
timeout (the live workers' heartbeats, read at most once a second); `submit()`
queues regardless, as `POST /v1/jobs` does, for a worker that starts later.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import msgspec
from redis.asyncio import Redis
from redis.exceptions import NoPermissionError

from derender_queue.contract.model_name import model_named
from derender_queue.contract.requests import DerenderChatRequest
from derender_queue.contract.types import Endpoint, JobKind
from derender_queue.errors import DerenderError
from derender_queue.models_config import read_models_config
from derender_queue.settings import DEFAULT_REDIS_URL, load_settings

from .cluster import client_for, is_cluster, quiet_replaced_nodes
from .connection import sibling_client
from .envelope import ResultEnvelope
from .failures import as_redis_error
from .heartbeat import served_models
from .keys import Keys, now_ms
from .queue import JobQueue
from .replication import Durability
from .waiter import ResultWaiter

log = logging.getLogger(__name__)
SERVED_MAX_AGE_S = 1.0
"""How long a read of the live workers' models is reused (heartbeats come every 2 s)."""
WORKER_POLL_S = 0.25


@dataclass(frozen=True)
class Result:
    status: int
    body: bytes
    envelope: ResultEnvelope

    def json(self) -> Any:
        return msgspec.json.decode(self.body)


class DerenderClient:
    def __init__(
        self, redis_url: str = DEFAULT_REDIS_URL, *, key_prefix: str = "derender",
        default_model: str | None = None, models_config: str | Path | None = None, redis: Redis | None = None,
        durability: Durability | None = None, batching: bool | None = None, shards: int | None = None,
    ) -> None:
        # `redis_url` may name a Sentinel-managed master (wire/connection.py).
        # What is left out is read as the API reads it: `durability` (replicas a
        # submit waits for, NotReplicated if too few) from DERENDER_MIN_REPLICAS and
        # DERENDER_REPLICA_TIMEOUT_S, `batching` (whether submits batch) from
        # DERENDER_BATCHING, `shards` from DERENDER_SHARDS.
        settings = load_settings()
        self.redis = redis or client_for(redis_url)
        cluster = is_cluster(self.redis)  # its waiter subscribes on connections of its own
        self._listener = redis or (self.redis if cluster else sibling_client(self.redis))
        self.keys = Keys(key_prefix, cluster=cluster)
        self.queue = JobQueue(self.redis, self.keys,
                              durability=durability or Durability.of(settings.min_replicas, settings.replica_timeout_s),
                              batching=settings.batching if batching is None else batching,
                              shards=shards or settings.shards)
        self.waiter = ResultWaiter(self._listener, self.keys, tags=self.queue.tags if cluster else ())
        if not default_model:  # the API's: the first of the models config (module docstring)
            path = models_config if models_config is not None else os.environ.get("DERENDER_MODELS_CONFIG") or None
            default_model = read_models_config(Path(path) if path else None)[0].name
        self.default_model = default_model
        self._started = False
        self._served: set[str] | None = None
        self._served_at = float("-inf")

    async def __aenter__(self) -> DerenderClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        if not self._started:
            if self.keys.cluster:
                quiet_replaced_nodes(asyncio.get_running_loop())
            await self.waiter.start()
            self._started = True

    async def close(self) -> None:
        await self.waiter.close()
        await self.redis.aclose()
        if self._listener is not self.redis:
            await self._listener.aclose()

    async def submit(
        self, endpoint: JobKind, body: bytes | dict[str, Any], model: str | None = None, *,
        deadline_s: float | None = None, notify: bool = True,
    ) -> str:
        """Enqueue a derender body; returns the job id. `notify` lets `wait`
        wake on the worker's notification instead of polling."""
        await self.start()
        raw = body if isinstance(body, bytes) else msgspec.json.encode(body)
        model = model or self.model_of(raw)
        job_id = self.queue.new_id()
        if notify:
            self.waiter.expect(job_id)
        deadline = None if deadline_s is None else now_ms() + int(deadline_s * 1000)
        try:
            with as_redis_error():  # a failed call is a RedisError, whatever redis-py raised
                return await self.queue.submit(
                    endpoint, raw, model, job_id=job_id, reply_to=self.waiter.reply_to if notify else None,
                    deadline_ms=deadline,
                )
        except BaseException:
            self.waiter.forget(job_id)
            raise

    def model_of(self, raw: bytes) -> str:
        """The model a body names, else the default. A body whose model cannot
        be read goes to the default model too: its worker answers the 400, in
        the words a local derender would use."""
        try:
            name = model_named(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            name = None
        return name or self.default_model

    async def served_models(self, max_age_s: float = SERVED_MAX_AGE_S) -> set[str] | None:
        """Models some live worker serves; None when this Redis user may not
        read the heartbeats (a producer ACL without `{p}:workers`)."""
        now = time.monotonic()
        if now - self._served_at > max_age_s:
            try:
                with as_redis_error():
                    self._served = await served_models(self.redis, self.keys)
            except NoPermissionError:
                log.debug("cannot read worker heartbeats (ACL); skipping the live-worker check")
                self._served = None
            self._served_at = now
        return self._served

    async def require_worker(self, model: str) -> None:
        """A 503 DerenderError unless a live worker serves `model`."""
        served = await self.served_models()
        if served is None or model in served:
            return
        served = await self.served_models(max_age_s=0)  # a worker may have just started
        if served is not None and model not in served:
            raise DerenderError(
                f"no live worker serves model `{model}` (live workers serve: {', '.join(sorted(served)) or 'none'})",
                status=503, param="model",
            )

    async def wait_for_worker(self, model: str, timeout: float) -> bool:
        """True once a live worker serves `model`, False after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            served = await self.served_models(max_age_s=0)
            if served is None or model in served:
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(min(WORKER_POLL_S, max(deadline - time.monotonic(), 0)))

    async def wait(self, job_id: str, timeout: float = 30.0) -> Result:
        """The finished job's result (consumed); TimeoutError if none in time."""
        result = await self.waiter.wait(self.queue, job_id, timeout)
        if result is None:
            raise TimeoutError(f"no result for job {job_id} within {timeout:g} s")
        envelope, body = result
        return Result(envelope.status, bytes(body), envelope)

    async def derender(self, endpoint: JobKind, body: bytes | dict[str, Any] | msgspec.Struct, model: str | None = None,
                       timeout: float = 30.0) -> dict[str, Any]:
        """One synchronous derender: a 503 DerenderError at once when no live
        worker serves the model, else the response (errors raised as the API
        would answer them)."""
        raw = body if isinstance(body, bytes) else msgspec.json.encode(body)
        model = model or self.model_of(raw)
        await self.require_worker(model)
        job_id = await self.submit(endpoint, raw, model, deadline_s=timeout)
        result = await self.wait(job_id, timeout)
        response: dict[str, Any] = result.json()
        if result.status != 200:
            error = response.get("error", {})
            raise DerenderError(error.get("message", "derender failed"), result.status, error.get("param"))
        return response

    async def derender_chat(self, body: bytes | dict[str, Any] | DerenderChatRequest, model: str | None = None,
                            timeout: float = 30.0) -> dict[str, Any]:
        return await self.derender("chat", body, model, timeout)

    async def derender_completion(self, body: bytes | dict[str, Any], model: str | None = None,
                                  timeout: float = 30.0) -> dict[str, Any]:
        return await self.derender("completion", body, model, timeout)

    async def derender_step(self, endpoint: Endpoint, items: Sequence[bytes | dict[str, Any]],
                            model: str | None = None, timeout: float = 30.0) -> list[dict[str, Any]]:
        """One engine step: each item a streaming chunk body (`"stream": true`,
        `generate_chunk`, `stream_state`, ...), all derendered by one job.
        Returns one result per item, in order: `{"chunk", "stream_state"}`, or
        `{"error", "status"}` for an item that failed alone. A step that fails
        as a whole (a bad envelope, too many items, no worker) raises DerenderError."""
        model = model or self.default_model
        parts = [item if isinstance(item, bytes) else msgspec.json.encode(item) for item in items]
        # `model` first: the API reads it without parsing the items.
        head = msgspec.json.encode({"model": model, "endpoint": endpoint})[:-1]
        body = head + b',"items":[' + b",".join(parts) + b"]}"
        return cast(list[dict[str, Any]], (await self.derender("step", body, model, timeout))["results"])
