"""`GET /status`: one server-rendered HTML page, and `GET /status.json`, the
same snapshot as JSON (api/status_data.py).

No build step, no CDN: a little inline CSS and a script that re-fetches the
page every `REFRESH_MS` and swaps its `<main>` (a failed fetch keeps the last
view and marks it stale). Every value from Redis or a request is escaped, and
a Content-Security-Policy allows only this page's own script and style.
"""

from __future__ import annotations

import base64
import hashlib
import time
from html import escape

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from .instrument import JSON, caller_scope
from .state import api_state
from .status_charts import line_chart
from .status_data import QueueRow, Status, WorkerRow, snapshot

REFRESH_MS = 2000
_STYLE = (
    "body{font:14px system-ui,sans-serif;margin:16px;color:#222}h1{font-size:18px;margin:0 0 4px}"
    "h2{font-size:15px;margin:18px 0 6px}table{border-collapse:collapse}td,th{padding:3px 10px;text-align:left;"
    "border-bottom:1px solid #eee}th{color:#555;font-weight:600}td.n{text-align:right;font-variant-numeric:"
    "tabular-nums}code{font-size:12px;color:#555}.bad{color:#b00020}.meta{color:#666}"
    ".charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:8px 28px}"
    "figure{margin:0}figure svg{width:100%;height:auto;display:block}figcaption{color:#555;margin-bottom:2px}"
    ".axis{display:flex;justify-content:space-between;color:#999;font-size:11px}.key{margin-left:8px}"
    ".key.p99,.key.errors{color:#d9480f}.key.p50,.key.requests,.key.jobs,.key.tokens{color:#1864ab}"
    "body.stale main{opacity:.5}#stale{color:#b00020}"
)
_SCRIPT = (
    "(function(){var s=document.getElementById('stale');function tick(){fetch(location.href,{cache:'no-store'})"
    ".then(function(r){if(!r.ok)throw new Error('HTTP '+r.status);return r.text()}).then(function(t){"
    "var m=new DOMParser().parseFromString(t,'text/html').querySelector('main');if(!m)throw new Error('no page');"
    "document.querySelector('main').replaceWith(m);document.body.classList.remove('stale');s.textContent=''})"
    ".catch(function(e){document.body.classList.add('stale');s.textContent='stale: '+e.message})"
    f".finally(function(){{setTimeout(tick,{REFRESH_MS})}})}}setTimeout(tick,{REFRESH_MS})}})();"
)


def _sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


CSP = (f"default-src 'none'; script-src {_sha(_SCRIPT)}; style-src {_sha(_STYLE)}; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def _clock(ms: int) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ms / 1000))


def _worker(w: WorkerRow) -> str:
    models = "<br>".join(f'{escape(m)} <code title="{escape(sha)}">{escape(sha[:12])}</code>'
                         for m, sha in sorted(w.models.items()))
    return (f'<tr class="worker" data-id="{escape(w.id)}"><td><code>{escape(w.id)}</code></td>'
            f"<td>{escape(w.host)}:{w.pid}</td><td>{models}</td><td class=\"n age\">{w.heartbeat_age_s:.1f} s</td>"
            f'<td class="n busy">{w.busy} / {w.executors}</td><td class="n rate">{w.jobs_per_s:g}</td>'
            f'<td class="n tokens">{w.tokens_per_s:g}</td><td class="n wait">{_ms(w.wait_p50_ms)}</td>'
            f'<td class="n done">{w.jobs_done}</td><td class="n c4">{w.client_errors}</td>'
            f'<td class="n c5{" bad" if w.errors else ""}">{w.errors}</td></tr>')


def _queue(q: QueueRow) -> str:
    depth = "?" if q.depth is None else str(q.depth)
    workers = f'<td class="n{" bad" if not q.workers else ""}">{q.workers}</td>'
    return f'<tr class="queue" data-model="{escape(q.model)}"><td>{escape(q.model)}</td>' \
           f'<td class="n depth">{depth}</td>{workers}</tr>'


def _workers(s: Status) -> str:
    head = ("<tr><th>worker</th><th>host:pid</th><th>models, tokenizer sha256</th><th>heartbeat</th>"
            "<th>busy executors</th><th>jobs/s</th><th>tokens/s</th><th>queue wait p50</th><th>jobs done</th>"
            "<th>4xx</th><th>5xx</th></tr>")
    rows = "".join(map(_worker, s.workers)) or '<tr><td colspan="11" class="bad">no live workers</td></tr>'
    return (f'<h2>Workers ({len(s.workers)})</h2><p class="meta">rates over each worker\'s last 10 s</p>'
            f'<table id="workers">{head}{rows}</table>')


def _system(s: Status) -> str:
    m, per_second = s.system, s.system_seconds
    summary = (f'<p class="meta" id="system">last {m.window_s} s: {m.jobs} jobs ({m.jobs_per_s:g}/s), '
               f"{m.client_errors} 4xx, {m.errors} 5xx, {m.tokens} tokens ({m.tokens_per_s:g}/s), queue wait "
               f"p50 {_ms(m.wait_p50_ms)}, p99 {_ms(m.wait_p99_ms)}; every job the live workers ran, "
               "whoever sent it (HTTP, /v1/jobs, SSE, engine steps, producers on Redis)</p>")
    jobs = line_chart("chart-jobs", "jobs/s", "/s", [
        ("jobs", "#1864ab", [float(x.jobs) for x in per_second]),
        ("errors", "#d9480f", [float(x.errors) for x in per_second])])
    tokens = line_chart("chart-tokens", "tokens/s", "/s",
                        [("tokens", "#1864ab", [float(x.tokens) for x in per_second])])
    wait = line_chart("chart-wait", "queue wait", "ms", [
        ("p50", "#1864ab", [x.wait_p50_ms for x in per_second]),
        ("p99", "#d9480f", [x.wait_p99_ms for x in per_second])], log=True)
    return f'<h2>Jobs the workers ran</h2>{summary}<div class="charts">{jobs}{tokens}{wait}</div>'


def _charts(s: Status) -> str:
    m = s.minute
    summary = (f'<p class="meta" id="minute">last {m.window_s} s: {m.requests} requests '
               f"({m.requests_per_s:g}/s), {m.errors} errors, p50 {_ms(m.p50_ms)}, p99 {_ms(m.p99_ms)}; "
               "receipt to answer of this API process's synchronous derenders</p>")
    rate = line_chart("chart-rate", "requests/s", "/s", [
        ("requests", "#1864ab", [float(x.requests) for x in s.seconds]),
        ("errors", "#d9480f", [float(x.errors) for x in s.seconds])])
    latency = line_chart("chart-latency", "latency", "ms", [
        ("p50", "#1864ab", [x.p50_ms for x in s.seconds]), ("p99", "#d9480f", [x.p99_ms for x in s.seconds])],
        log=True)
    return f'<h2>Synchronous requests through this API</h2>{summary}<div class="charts">{rate}{latency}</div>'


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g} ms"


def _errors(s: Status) -> str:
    everyone = s.viewer is None
    rows = "".join(
        f'<tr class="error"><td>{_clock(e.time_ms)}</td><td>{escape(e.route)}</td><td class="n">{e.status}</td>'
        + (f"<td>{escape(e.client)}</td>" if everyone else "")
        + f'<td><code>{escape(e.job_id or "-")}</code></td><td>{escape(e.message)}</td></tr>'
        for e in s.recent_errors) or f'<tr><td colspan="{6 if everyone else 5}" class="meta">none</td></tr>'
    whose = "every client's" if everyone else f"yours ({escape(s.viewer or '')}); operator keys see every client's"
    client = "<th>client</th>" if everyone else ""
    return (f'<h2>Recent errors ({len(s.recent_errors)})</h2><p class="meta" id="whose">{whose}</p>'
            f'<table id="errors"><tr><th>time (UTC)</th><th>route</th><th>status</th>{client}<th>job id</th>'
            f"<th>message</th></tr>{rows}</table>")


def render_page(s: Status) -> bytes:
    redis = "ok" if s.redis == "ok" else f'<span class="bad">{escape(s.redis)}</span>'
    queues = "".join(map(_queue, s.queues))
    main = (
        f'<main><p class="meta">updated <span id="updated">{_clock(s.generated_ms)}</span> UTC, Redis {redis}, '
        f"API up since {_clock(s.api_started_ms)}</p>{_workers(s)}"
        f'<h2>Queues</h2><table id="queues"><tr><th>model</th><th>queued jobs</th><th>live workers</th></tr>'
        f"{queues}</table>{_system(s)}{_charts(s)}{_errors(s)}</main>"
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>derender-queue status</title>'
        f'<meta name="viewport" content="width=device-width"><style>{_STYLE}</style></head><body>'
        f'<h1>derender-queue status</h1><span id="stale"></span>{main}<script>{_SCRIPT}</script></body></html>'
    ).encode()


async def _snapshot(request: Request) -> Status:
    """The snapshot with the errors the caller may see: every client's for an
    operator key, or when the API has no keys (nobody is told apart); else its own."""
    state = api_state(request)
    scope = caller_scope(request)
    return await snapshot(state, None if not state.api_keys or scope in state.settings.operator_names() else scope)


async def status_page(request: Request) -> Response:
    return Response(render_page(await _snapshot(request)), media_type="text/html; charset=utf-8",
                    headers={"Cache-Control": "no-store", "Content-Security-Policy": CSP})


async def status_json(request: Request) -> Response:
    return Response(msgspec.json.encode(await _snapshot(request)), media_type=JSON,
                    headers={"Cache-Control": "no-store"})
