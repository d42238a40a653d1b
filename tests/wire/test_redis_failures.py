"""A failed Redis call of any exception type (issue 31, items 1-3).

redis-py 5's cluster client closes every node's connections after an error
on one node, and calls in flight elsewhere then fail with AttributeError
('NoneType' object has no attribute 'writelines') or uvloop's RuntimeError.
Such a failure leaves a job's fate unsure: the claim is read back, the result
written again, the heartbeat goes on, the API answers 503. Here a Redis call
fails that way inside redis-py (its connection's send raises), on fakeredis;
tests/integration/test_cluster_faults.py has the real cluster.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable
from types import SimpleNamespace

import fakeredis
import pytest
import redis.asyncio.connection
from redis.crc import key_slot
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.testclient import TestClient

from api.instrument import instrumented
from derender_queue.wire.envelope import JobEnvelope, ResultEnvelope, pack
from derender_queue.wire.heartbeat import beat_forever, new_heartbeat
from derender_queue.wire.keys import Keys, now_ms
from derender_queue.wire.lanes import pack_batch
from derender_queue.wire.queue import JobQueue
from derender_queue.wire.waiter import ResultWaiter
from tests.worker.test_worker_liveness import _heartbeats, _settings, _until
from worker.lane_server import LaneServer
from worker.liveness import Liveness
from worker.main import serve

MODEL = "deepseek-v4"
CLOSED = "'NoneType' object has no attribute 'writelines'"
"""What redis-py's connection raises when another task closed it mid-call."""


class Breaker:
    """Makes Redis calls fail inside redis-py: a connection's send raises, as one
    another task closed does (`when(args)` picks the calls; `times` of them)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.left = 0
        self.error: Callable[[], Exception] = lambda: AttributeError(CLOSED)
        self.when: Callable[[bytes], bool] = lambda _: True
        real = redis.asyncio.connection.AbstractConnection.send_packed_command

        async def send(conn: object, command: object, check_health: bool = True) -> None:
            packed = b"".join(command) if isinstance(command, list) else command
            if self.left and self.when(bytes(packed)):  # type: ignore[arg-type]
                self.left -= 1
                raise self.error()
            await real(conn, command, check_health)  # type: ignore[arg-type]

        monkeypatch.setattr(redis.asyncio.connection.AbstractConnection, "send_packed_command", send)

    def fail(self, times: int, error: Callable[[], Exception] | None = None,
             when: Callable[[bytes], bool] | None = None) -> None:
        self.left = times
        self.error = error or self.error
        self.when = when or (lambda _: True)


@pytest.fixture
def breaker(monkeypatch: pytest.MonkeyPatch) -> Breaker:
    return Breaker(monkeypatch)


def test_any_exception_raised_inside_redis_py_is_a_redis_failure():
    from derender_queue.wire.failures import ignoring_redis_failures, redis_failure

    with pytest.raises(AttributeError) as inside:
        key_slot(None)  # type: ignore[arg-type]  # redis-py itself raises
    assert redis_failure(inside.value)
    assert redis_failure(ConnectionResetError()) and redis_failure(redis.exceptions.ResponseError("x"))
    assert not redis_failure(AttributeError("a bug of ours")) and not redis_failure(asyncio.CancelledError())
    with pytest.raises(AttributeError), ignoring_redis_failures():
        raise AttributeError("a bug of ours still raises")
    with ignoring_redis_failures():
        key_slot(None)  # type: ignore[arg-type]


def test_a_failure_described_for_a_log_line_holds_no_command_arguments():
    from derender_queue.wire.failures import describe

    body = "x" * 5000
    error = redis.exceptions.ConnectionError(f"Command # 2 (LPUSH lane {body}) of pipeline caused error: gone")
    assert describe(error) == "ConnectionError: gone"
    assert len(describe(RuntimeError(body))) < 250


async def _lane_server(r: fakeredis.FakeAsyncRedis, run: Callable[..., object]) -> LaneServer:
    runtime = SimpleNamespace(worker_id="w", run=run, run_batch=run)
    worker = SimpleNamespace(ctx={"runtime": runtime}, keys=Keys("t"), model=MODEL, pool=r, tags=("s0",),
                             max_jobs=1, poll_delay_s=0.05)
    return LaneServer(worker)  # type: ignore[arg-type]  # the attributes LaneServer reads of its worker


@pytest.mark.parametrize("batch", [False, True], ids=["job", "batch"])
async def test_a_finish_that_fails_with_any_error_leaves_its_claim_read_back(batch):
    """Before: an AttributeError (or uvloop's RuntimeError) out of the finish was
    "failed outside the derender": the slot claimed again, a second value went
    into its list beside the first, and the next finish deleted both (4 of 8
    cluster fault runs lost 5-31 acknowledged jobs)."""
    r = fakeredis.FakeAsyncRedis()
    job = pack(JobEnvelope(v=2, id="s0.a", endpoint="chat", model=MODEL, enqueued_ms=now_ms()), b"{}")
    value = pack_batch([job, job]) if batch else job
    ran: list[bytes] = []

    async def run(*args: object, **kwargs: object) -> None:
        ran.append(value)
        raise (RuntimeError("unable to perform operation on <TCPTransport closed=True>") if batch
               else AttributeError(CLOSED))

    server = await _lane_server(r, run)
    active, lane = server.actives[0], server.lanes[0].key
    await r.rpush(active, value)  # claimed (BLMOVE'd into slot 0's list)
    await server._run(0, value)
    assert ran and 0 in server.unsure and await r.lrange(active, 0, -1) == [value]
    await r.lpush(lane, b"the next job")
    assert await server._take(r, lane, 0) == value  # read back, not a second value beside it
    assert await r.lrange(lane, 0, -1) == [b"the next job"]


async def test_a_result_write_that_fails_with_any_error_is_written_again(breaker):
    from worker.jobs import JobRuntime

    r = fakeredis.FakeAsyncRedis()
    runtime = JobRuntime(derenderer=None, cpu=None, redis=r, keys=Keys("t"), worker_id="w",  # type: ignore[arg-type]
                         result_ttl_ms=60_000)
    breaker.fail(1)
    await runtime._with_retries("j", lambda: r.set("t:result", b"written"))
    assert await r.get("t:result") == b"written" and breaker.left == 0


async def test_the_heartbeat_survives_any_error_and_counts_it(breaker):
    """Before: beat_forever caught RedisError and OSError only; a RuntimeError
    ended the task silently and the worker served on, unlisted."""
    r, keys = fakeredis.FakeAsyncRedis(), Keys("t")
    beats: list[bool] = []
    errors: list[str] = []
    breaker.fail(2, lambda: RuntimeError("unable to perform operation on <TCPTransport closed=True>"))
    task = asyncio.create_task(beat_forever(r, keys, new_heartbeat("w", {MODEL: "sha"}, 1), 0.02,
                                            beaten=beats.append, on_error=errors.append))
    try:
        await _until(lambda: True in beats)
        assert beats[:3] == [False, False, True] and errors == ["heartbeat", "heartbeat"] and not task.done()
        assert await r.zscore(keys.workers, "w") is not None
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_worker_whose_heartbeat_cannot_be_written_claims_nothing_until_it_can(registry, prefix, breaker):
    """The heartbeat's writes fail inside redis-py: the worker stops claiming
    before its heartbeat lapses, has claimed nothing once it has lapsed (when
    others would take its claims over), and claims again once it beats again.
    Before: the heartbeat task died and the worker claimed on, unlisted."""
    from derender_queue.wire.heartbeat import CLAIM_BEATS

    server, keys = fakeredis.FakeServer(), Keys(prefix)
    settings, liveness, stop = _settings(prefix), Liveness(), asyncio.Event()
    before = _counted("derender_worker_background_errors_total", task="heartbeat")
    worker = asyncio.create_task(serve(settings, registry, fakeredis.FakeAsyncRedis(server=server),
                                       stop=stop, liveness=liveness))
    r, lane = fakeredis.FakeRedis(server=server), keys.lane("s0", MODEL)
    try:
        await _until(lambda: _heartbeats(server, prefix) == 1)
        (worker_id,) = r.zrange(keys.workers, 0, -1)
        registry_key = keys.workers.encode()
        breaker.fail(10**6, when=lambda packed: b"ZADD" in packed and registry_key in packed)
        await _until(lambda: not liveness.heartbeat_fresh(CLAIM_BEATS * settings.heartbeat_s))
        dropped = _counted("derender_worker_job_start_failures_total", reason="unreadable")
        r.lpush(lane, b"not a job: dropped once claimed")
        # Lapsed (others may take its claims over now), and the value is in the lane: a claim
        # already blocked when the heartbeat went stale puts what it took back. Had the worker
        # run it, the value would be gone for good (dropped, counted) and this would time out.
        await _until(lambda: r.zscore(keys.workers, worker_id) < now_ms()
                     and r.lrange(lane, 0, -1) == [b"not a job: dropped once claimed"])
        assert _counted("derender_worker_job_start_failures_total", reason="unreadable") == dropped
        assert _counted("derender_worker_background_errors_total", task="heartbeat") > before
        breaker.fail(0)
        await _until(lambda: r.llen(lane) == 0)  # it beats again, and claims
        assert r.zscore(keys.workers, worker_id) > now_ms()
    finally:
        stop.set()
        assert await asyncio.wait_for(worker, 30) is True


def _counted(name: str, **labels: str) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_the_api_answers_503_for_a_redis_failure_of_any_type_and_500_for_a_bug():
    """Before: only RedisError and OSError were 503s; an AttributeError out of
    redis-py's cluster client was a 500 (27 at the end of one migration)."""

    async def redis_fails(request: object) -> None:
        key_slot(None)  # type: ignore[arg-type]  # raises inside redis-py

    async def bug(request: object) -> None:
        raise AttributeError("a bug of ours")

    app = Starlette(routes=[Route("/redis", instrumented("redis", redis_fails, public=True)),
                            Route("/bug", instrumented("bug", bug, public=True))])
    with TestClient(app) as client:
        unavailable, broken = client.get("/redis"), client.get("/bug")
    assert unavailable.status_code == 503 and unavailable.headers["retry-after"] == "1"
    assert unavailable.json()["error"]["message"] == "Redis is unavailable, retry shortly (AttributeError)"
    assert broken.status_code == 500


async def test_a_waiter_keeps_waiting_through_redis_failures_of_any_type(breaker, caplog):
    """Before: an AttributeError from the result's GET left the waiter (a 500 from the API,
    an exception from DerenderClient.wait), and a failed discard of a result
    ended as "Task exception was never retrieved"."""
    r, keys = fakeredis.FakeAsyncRedis(), Keys("t")
    queue = JobQueue(r, keys)
    errors: list[str] = []
    waiter = ResultWaiter(r, keys, on_error=errors.append)
    job_id = "s0.done"
    await r.set(keys.job(job_id), pack(ResultEnvelope(v=1, id=job_id, status=200, finished_ms=now_ms()), b"{}"))
    failed: set[bytes] = set()

    def first_get_and_first_del(packed: bytes) -> bool:
        command = next((c for c in (b"GET", b"DEL") if c in packed), None)
        if command is None or command in failed:
            return False
        failed.add(command)
        return True

    breaker.fail(2, when=first_get_and_first_del)  # a read, then the discard once the result is held
    with caplog.at_level(logging.WARNING):
        envelope, body = await waiter.wait(queue, job_id, timeout=10)  # type: ignore[misc]
        await _until(lambda: breaker.left == 0)
        for _ in range(3):
            await asyncio.sleep(0)  # the discard task's callback runs
        gc.collect()  # an unretrieved task exception is reported as the task is collected
    assert (envelope.id, bytes(body)) == (job_id, b"{}")
    assert "never retrieved" not in caplog.text


async def test_a_spawned_task_that_fails_is_logged_and_counted_not_left_unretrieved(caplog):
    from derender_queue.wire.background import spawn

    errors: list[str] = []
    tasks: set[asyncio.Task[None]] = set()

    async def fails() -> None:
        raise ValueError("a bug")

    with caplog.at_level(logging.ERROR):
        task = spawn(fails(), "cleanup", errors.append, tasks)
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)
    assert errors == ["cleanup"] and not tasks and "background task cleanup failed" in caplog.text


async def test_a_replaced_cluster_node_collected_with_a_connection_open_is_not_an_error(caplog):
    """Before: asyncio's handler logged "Unclosed ClusterNode object" at ERROR,
    8-12 lines per failover (redis-py replaces its nodes on every re-read)."""
    from redis.asyncio.cluster import ClusterNode

    from derender_queue.wire.cluster import quiet_replaced_nodes

    loop = asyncio.get_running_loop()
    seen: list[str] = []
    loop.set_exception_handler(lambda _, context: seen.append(context["message"]))
    try:
        quiet_replaced_nodes(loop)
        quiet_replaced_nodes(loop)  # once is enough: not chained twice
        with caplog.at_level(logging.ERROR):
            loop.call_exception_handler({"message": "Unclosed ClusterNode object", "client": ClusterNode("h", 1)})
            loop.call_exception_handler({"message": "something else"})
        assert seen == ["something else"] and "Unclosed" not in caplog.text
    finally:
        loop.set_exception_handler(None)


async def test_a_producer_sees_every_failed_redis_call_as_a_redis_error(breaker):
    """A Python producer sends a job again on RedisError; before, a submit that
    failed inside redis-py's cluster client raised a bare AttributeError."""
    from derender_queue.wire.client import DerenderClient
    from derender_queue.wire.failures import RedisCallFailed

    async with DerenderClient(redis=fakeredis.FakeAsyncRedis(), key_prefix="t") as client:
        breaker.fail(1)
        with pytest.raises(redis.exceptions.RedisError) as refused:
            await client.submit("chat", b"{}")
        assert isinstance(refused.value, RedisCallFailed) and isinstance(refused.value.__cause__, AttributeError)
        assert await client.submit("chat", b"{}")  # sent again: accepted
