"""Routes about the service rather than a job: health, readiness, models,
metrics, the OpenAPI document."""

from __future__ import annotations

import time

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from derender_queue.wire.connection import in_memory
from derender_queue.wire.failures import redis_failure
from derender_queue.wire.heartbeat import live_workers
from derender_queue.wire.redis_url import redis_address
from derender_queue.wire.replication import node_role

from .instrument import JSON
from .state import api_state


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def ready(request: Request) -> Response:
    state = api_state(request)
    try:
        await state.redis.ping()
        role, replicas = await node_role(state.redis)
        workers = await live_workers(state.redis, state.keys)
    except Exception as exc:
        if not redis_failure(exc):
            raise
        where = "embedded" if in_memory(state.redis) else redis_address(state.settings.redis_url_or_default())
        return JSONResponse({"ready": False, "redis": f"unreachable: {where} ({type(exc).__name__}: {exc})"},
                            status_code=503, headers={"Retry-After": "1"})
    wanted = state.settings.min_replicas
    if role not in ("master", "unknown") or (replicas is not None and replicas < wanted):
        problem = f"not a master ({role})" if role != "master" else f"{replicas} of {wanted} replicas connected"
        return JSONResponse({"ready": False, "redis": problem}, status_code=503, headers={"Retry-After": "1"})
    served = sorted({m for w in workers for m in w.models})
    return JSONResponse({
        "ready": True, "redis": "ok", "workers": len(workers), "models": served,
        "configured_models": state.model_names,
        "tokenizers": {m: sorted({w.models[m] for w in workers if m in w.models}) for m in served},
    })


async def models(request: Request) -> Response:
    state = api_state(request)
    workers = await live_workers(state.redis, state.keys)
    names = sorted({m for w in workers for m in w.models})
    created = int(time.time())
    data = [{"id": n, "object": "model", "created": created, "owned_by": "derender-queue"} for n in names]
    return JSONResponse({"object": "list", "data": data})


async def metrics_endpoint(request: Request) -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


async def openapi(request: Request) -> Response:
    return Response(request.app.state.openapi, media_type=JSON)
