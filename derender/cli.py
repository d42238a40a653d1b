"""The `derender` console script: one-shot derender, worker, API, and the all-in-one `run`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from derender_queue.contract.error_shape import error_body
from derender_queue.errors import DerenderError
from derender_queue.logs import setup_logging
from derender_queue.settings import Settings, load_settings


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings(**{k: getattr(args, k, None) for k in Settings.model_fields})
    except ValueError as exc:  # SettingsError: a line per bad value, naming its variable (or flag)
        print(f"derender: invalid settings: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "uses_redis", False) and (problem := _service_settings_problem(settings)):
        print(problem, file=sys.stderr)
        return 2
    setup_logging(settings.log_level)
    status: int = args.run(args, settings)
    return status


def _service_settings_problem(settings: Settings) -> str | None:
    """One line (like a settings error) for a DERENDER_REDIS_URL that cannot
    work or a models config that cannot be read, before any slow start-up."""
    from derender_queue.models_config import read_models_config
    from derender_queue.wire.redis_url import check_redis_url, redacted

    try:
        check_redis_url(settings.redis_url_or_default())
    except ValueError as exc:
        return f"derender: invalid settings: DERENDER_REDIS_URL={redacted(settings.redis_url or '')!r}: {exc}"
    try:
        read_models_config(settings.models_config)
    except ValueError as exc:  # it names the file
        return f"derender: invalid settings: {exc}"
    return None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="derender", description=__doc__)
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    for endpoint, path in (("chat", "/v1/chat/completions/derender"), ("completion", "/v1/completions/derender")):
        sub = commands.add_parser(
            endpoint,
            help=f"derender one {path} body from stdin to stdout",
            description=f"Read one {path} request body as JSON on stdin; write the response JSON on "
            "stdout. Errors go to stderr in vLLM's error shape, with exit code 2. Each call loads the "
            "model's tokenizer first (about 1 to 5 s; the derender itself takes milliseconds): for many "
            "requests use `derender batch` or the HTTP API.",
        )
        sub.add_argument("--model", help="served model name (overrides the body's `model`)")
        _models_flag(sub)
        sub.set_defaults(run=_run_one, endpoint=endpoint)

    worker = commands.add_parser("worker", help="arq worker serving the configured models from Redis")
    _models_flag(worker)
    worker.add_argument("--metrics-port", type=int, help="Prometheus port (env DERENDER_METRICS_PORT, 9100)")
    worker.add_argument("--processes", type=int, help="worker processes on this host, metrics ports "
                        "counting up from --metrics-port (env DERENDER_PROCESSES, 1)")
    worker.set_defaults(run=_run_worker, uses_redis=True)

    api = commands.add_parser("api", help="the HTTP API (enqueues to Redis, returns workers' results)")
    _models_flag(api)
    _listen_flags(api)
    api.set_defaults(run=_run_api, uses_redis=True)

    batch = commands.add_parser("batch", help="derender a JSONL file of requests (queue, or local processes)")
    batch.add_argument("input", type=Path, help="one derender request per line")
    batch.add_argument("output", type=Path, help="one response (or vLLM-shaped error) per line, in input order")
    batch.add_argument("--processes", type=int, help="local worker processes when no Redis is configured "
                       "(default: one per core)")
    batch.add_argument("--window", type=int, default=256, help="requests in flight through the queue")
    _models_flag(batch)
    batch.set_defaults(run=_run_batch, uses_redis=True)

    check = commands.add_parser("healthcheck", help="exit 0 if the local api (or worker) answers /health")
    check.add_argument("--role", choices=["api", "worker"], default="api")
    check.set_defaults(run=_run_healthcheck)

    run = commands.add_parser("run", help="API + one worker; embedded Redis unless DERENDER_REDIS_URL is set")
    _models_flag(run)
    _listen_flags(run)
    run.set_defaults(run=_run_all, uses_redis=True)
    return parser


def _models_flag(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--models-config", type=Path, help="models config TOML (env DERENDER_MODELS_CONFIG)")


def _listen_flags(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--host", help="listen address (env DERENDER_HOST, 127.0.0.1)")
    sub.add_argument("--port", type=int, help="listen port (env DERENDER_PORT, 8000)")


def _run_one(args: argparse.Namespace, settings: Settings) -> int:
    from derender_queue.core import Derenderer, ModelRegistry, read_models_config

    body = sys.stdin.buffer.read()
    try:
        registry = ModelRegistry(read_models_config(settings.models_config, settings.compat), preload=False)
        secret = settings.stream_secret.encode() if settings.stream_secret else None
        out = Derenderer(registry, secret).derender(args.endpoint, body, args.model).body
    except DerenderError as exc:
        sys.stderr.buffer.write(exc.body() + b"\n")
        return 2
    except ValueError as exc:  # a bad models config
        sys.stderr.buffer.write(error_body(500, str(exc)) + b"\n")
        return 1
    sys.stdout.buffer.write(out + b"\n")
    return 0


def _ports_free(settings: Settings, api: bool = False, metrics: int = 0, metrics_flag: bool = True) -> bool:
    """Every port the command will listen on can be had: checked before any
    slow start-up; else one line on stderr naming the setting to change."""
    from derender_queue.ports import API_PORT, METRICS_PORT, bind_error, cannot_listen
    from worker.http import METRICS_ADDR

    metrics_setting = METRICS_PORT if metrics_flag else METRICS_PORT.removeprefix("--metrics-port or ")
    wanted = [("the HTTP port", settings.host, settings.port, API_PORT)] if api else []
    if settings.metrics_port:  # `--processes N`: N ports counting up
        wanted += [("the metrics port", METRICS_ADDR, settings.metrics_port + i, metrics_setting)
                   for i in range(metrics)]
    for what, host, port, setting in wanted:
        if (error := bind_error(host, port)) is not None:
            print(cannot_listen(what, host, port, error, setting), file=sys.stderr)
            return False
    return True


def _run_worker(args: argparse.Namespace, settings: Settings) -> int:
    if not _ports_free(settings, metrics=settings.processes):
        return 2
    if settings.processes > 1:
        from worker.supervisor import supervise

        return supervise(settings)
    from worker.main import run_worker

    return run_worker(settings)


def _run_api(args: argparse.Namespace, settings: Settings) -> int:
    from api.server import run_api

    if not _ports_free(settings, api=True):
        return 2
    run_api(settings)
    return 0


def _run_batch(args: argparse.Namespace, settings: Settings) -> int:
    from .batch import run_batch

    return run_batch(settings, args.input, args.output, args.processes or os.cpu_count() or 1, args.window)


def _run_healthcheck(args: argparse.Namespace, settings: Settings) -> int:
    """For container HEALTHCHECKs: the api's /health, or the worker's (which
    fails when its event loop is stalled)."""
    import urllib.request

    port = settings.port if args.role == "api" else settings.metrics_port
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=3) as response:
            return 0 if response.status == 200 else 1
    except OSError:
        return 1


def _run_all(args: argparse.Namespace, settings: Settings) -> int:
    from .run import run_all

    # With a Redis URL its worker child serves a metrics port too (the embedded worker none).
    if not _ports_free(settings, api=True, metrics=1 if settings.redis_url else 0, metrics_flag=False):
        return 2
    return run_all(settings)


if __name__ == "__main__":
    sys.exit(main())
