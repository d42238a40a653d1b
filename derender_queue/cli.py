"""The `derender` console script."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .contract import error_body
from .errors import DerenderError
from .settings import load_settings


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    return args.run(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="derender", description=__doc__)
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    for endpoint, path in (("chat", "/v1/chat/completions/derender"), ("completion", "/v1/completions/derender")):
        sub = commands.add_parser(
            endpoint,
            help=f"derender one {path} body from stdin to stdout",
            description=f"Read one {path} request body as JSON on stdin; write the response JSON on "
            "stdout. Errors go to stderr in vLLM's error shape, with exit code 2.",
        )
        _model_flags(sub)
        sub.set_defaults(run=_run_one, endpoint=endpoint)
    return parser


def _model_flags(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--model", help="served model name (overrides the body's `model`)")
    sub.add_argument("--models-config", type=Path, help="models config TOML (env DERENDER_MODELS_CONFIG)")


def _run_one(args: argparse.Namespace) -> int:
    from worker.derender import Derenderer, ModelRegistry, read_models_config

    settings = load_settings(models_config=args.models_config)
    body = sys.stdin.buffer.read()
    try:
        registry = ModelRegistry(read_models_config(settings.models_config), preload=False)
        out = Derenderer(registry).derender(args.endpoint, body, args.model)
    except DerenderError as exc:
        sys.stderr.buffer.write(exc.body() + b"\n")
        return 2
    except ValueError as exc:  # a bad models config
        sys.stderr.buffer.write(error_body(500, str(exc)) + b"\n")
        return 1
    sys.stdout.buffer.write(out + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
