"""What the workers did, for the status page (issue 32 item 7): each worker
keeps its last minute per second from its own metrics and publishes it beside
its heartbeat; the API sums the live workers' seconds; the charts' axes fit
what they show. Fast: fakeredis and an injected clock; the browser test
(tests/api/test_status_page.py) looks at all of it on a real stack."""

from __future__ import annotations

import asyncio
import re
import time

import fakeredis

from api.status_charts import HEIGHT, line_chart, nice_ceiling, nice_floor
from api.workload import LAG_S, system
from derender_queue.wire.activity import WAIT_BOUNDS_S, WINDOW_S, WorkerSecond, read_activity, wait_quantile_ms
from derender_queue.wire.keys import Keys
from worker import metrics
from worker.activity_recorder import Recorder, Totals, publish_activity

NO_WAIT = (0,) * (len(WAIT_BOUNDS_S) + 1)


def _wait(bucket: int, n: int) -> tuple[int, ...]:
    return tuple(n if i == bucket else 0 for i in range(len(NO_WAIT)))


def test_recorder_puts_what_was_counted_in_its_second_and_forgets_after_the_window():
    totals = [Totals(0, 0, 0, 0, NO_WAIT)]
    recorder = Recorder(lambda: totals[-1])
    assert recorder.sample(100) is False  # nothing happened: nothing to write
    totals.append(Totals(5, 1, 1, 40, _wait(3, 5)))
    assert recorder.sample(101) is True
    assert list(recorder.seconds) == [WorkerSecond(101, 5, 1, 1, 40, list(_wait(3, 5)))]
    assert recorder.sample(102) is False
    assert recorder.sample(101 + WINDOW_S) is False and not recorder.seconds  # aged out; an idle worker writes nothing
    for t in range(200, 200 + 3 * WINDOW_S):  # memory is the window, whatever the load
        totals.append(Totals(totals[-1].jobs + 1, 0, 0, 0, NO_WAIT))
        recorder.sample(t)
    assert len(recorder.seconds) == WINDOW_S


def test_a_worker_publishes_every_job_its_metrics_counted():
    async def run() -> list[WorkerSecond]:
        redis, keys = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer()), Keys("t")
        task = asyncio.create_task(publish_activity(redis, keys, "w1"))
        await asyncio.sleep(0)  # the recorder starts from what was counted so far
        metrics.JOBS.labels("chat", "ok").inc(3)
        metrics.JOBS.labels("step", "client_error").inc()
        metrics.TOKENS.labels("m").inc(12)
        metrics.QUEUE_WAIT.observe(0.003)
        deadline = time.monotonic() + 10
        try:
            while time.monotonic() < deadline:
                seconds = (await read_activity(redis, keys, ["w1", "w2"])).get("w1", [])
                if sum(s.jobs for s in seconds) >= 4:
                    return seconds
                await asyncio.sleep(0.05)
            raise TimeoutError("no activity published")
        finally:
            task.cancel()

    seconds = asyncio.run(run())
    total = sum(s.jobs for s in seconds), sum(s.client_errors for s in seconds), sum(s.tokens for s in seconds)
    assert total == (4, 1, 12)
    assert [sum(x) for x in zip(*(s.wait for s in seconds), strict=True)] == list(_wait(3, 1))  # 3 ms: (2.5, 5]


def test_the_api_sums_live_workers_per_second_and_reads_past_a_stranger():
    now = 10_000
    newest = now - LAG_S
    a = [WorkerSecond(newest, 10, 1, 0, 100, list(_wait(3, 10))), WorkerSecond(newest - 1, 4, 0, 0, 40, list(NO_WAIT))]
    b = [WorkerSecond(newest, 6, 0, 2, 60, list(_wait(6, 6))), WorkerSecond(now - 200, 99, 0, 0, 0, list(NO_WAIT))]
    minute, seconds = system({"a": a, "b": b}, now)
    assert len(seconds) == WINDOW_S and seconds[-1].t == newest
    assert (seconds[-1].jobs, seconds[-1].errors, seconds[-1].tokens) == (16, 3, 160)
    assert seconds[-2].jobs == 4 and seconds[-2].wait_p50_ms is None and not any(s.jobs for s in seconds[:-2])
    # b's second from 200 s ago is out of the window
    assert (minute.jobs, minute.client_errors, minute.errors, minute.tokens) == (20, 1, 2, 200)
    assert 2.5 <= seconds[-1].wait_p50_ms <= 5 and 25 <= seconds[-1].wait_p99_ms <= 50

    async def read() -> dict:
        redis, keys = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer()), Keys("t")
        await redis.set(keys.activity("stranger"), b'{"seconds": "not this version"}')
        await redis.set(keys.activity("a"), b'{"seconds": [[1, 2, 0, 0, 3, [1]]]}')  # a histogram of another size
        return await read_activity(redis, keys, ["stranger", "a", "gone"])

    assert asyncio.run(read()) == {"a": []}


def test_queue_wait_quantiles_interpolate_inside_their_bucket():
    assert wait_quantile_ms(list(NO_WAIT), 0.5) is None
    assert wait_quantile_ms(list(_wait(3, 10)), 0.5) == 3.75  # half way through (2.5, 5] ms
    assert wait_quantile_ms(list(_wait(len(WAIT_BOUNDS_S), 1)), 0.99) == WAIT_BOUNDS_S[-1] * 1000


def _heights(chart: str, name: str) -> list[float]:
    path = re.search(f'class="line {name}" d="([^"]*)"', chart).group(1)
    return [float(y) for y in re.findall(r"[ML][\d.]+ ([\d.]+)", path)]


def test_axes_fit_the_data_so_low_values_are_not_a_flat_line():
    # A 1-1.5 ms median under a 100-200 ms p99: on a linear axis the median is a flat line at 0.
    p50 = [1.0, 1.5] * 30
    p99 = [100.0, 200.0] * 30
    chart = line_chart("c", "latency", "ms", [("p50", "#000", p50), ("p99", "#000", p99)], log=True)
    heights = _heights(chart, "p50")
    assert max(heights) - min(heights) >= 4, heights
    assert ">200 ms (log)<" in chart and 'class="bottom"' in chart and ">1<" in chart
    # A rate of half a job a second fills its chart.
    slow = line_chart("r", "jobs/s", "/s", [("jobs", "#000", [0.0, 0.5] * 30)])
    assert ">0.5 /s<" in slow and min(_heights(slow, "jobs")) <= 15
    assert ">1 /s<" in line_chart("z", "jobs/s", "/s", [("jobs", "#000", [0.0] * 60)])
    assert max(_heights(line_chart("z", "jobs/s", "/s", [("jobs", "#000", [0.0] * 60)]), "jobs")) == HEIGHT


def test_readable_scales():
    assert [nice_ceiling(v) for v in (0.03, 0.5, 1, 1.2, 7, 50, 51)] == [0.05, 0.5, 1, 2, 10, 50, 100]
    assert [nice_floor(v) for v in (0.03, 0.5, 1, 1.2, 7, 50, 51)] == [0.02, 0.5, 1, 1, 5, 50, 50]
