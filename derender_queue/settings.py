"""Every setting, from environment variables prefixed `DERENDER_` (docs/settings.md has the table)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .compat import DEFAULT_COMPAT, profile

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DERENDER_", extra="ignore")

    models_config: Path | None = None
    """TOML models config; unset serves the built-in `deepseek-v4`."""
    compat: str = DEFAULT_COMPAT
    """The vLLM release models answer as unless their config names one
    (`0.34` or `0.33`; derender_queue/compat.py)."""
    redis_url: str | None = None
    """`redis://` or `rediss://` (TLS), with password if any, or a Sentinel-managed
    master: `redis+sentinel://H1:P1,H2:P2/MASTER/DB` (`rediss+sentinel://` for TLS),
    or a Redis Cluster: `redis+cluster://H1:P1,H2:P2` (`rediss+cluster://`).
    Unset: workers and the API use redis://127.0.0.1:6379/0; `derender run`
    uses an embedded in-memory Redis."""
    min_replicas: int = Field(0, ge=0)
    """Replicas that must have a job before the API acknowledges it, and a result
    before a worker announces it (Redis WAIT); 0: the master's word, as before."""
    replica_timeout_s: float = Field(1.0, gt=0)
    """How long a write waits for `min_replicas`: then the job is refused (503 +
    Retry-After) or the worker writes its result again."""
    batching: bool = True
    """Producers coalesce small jobs that arrive while a submit
    is in flight into one batch job (docs/wire-format.md); off: one job
    per submit."""
    shards: int = Field(16, ge=1, le=256)
    """On a Redis Cluster: how many shards each model's queue is split into
    (docs/cluster.md). Every producer and worker of a
    deployment must use the same number. One Redis has one shard."""
    key_prefix: str = Field("derender", pattern=r"^[A-Za-z0-9_.-]+$")
    """Every key lives under it, so deployments can share one Redis."""
    heavy_workers: int = Field(1, ge=1)
    """Heavy-job children per worker process, forked with their own GIL
    (bench/probe.py chose them); one uses one core. Light jobs have a thread
    of the worker process."""
    heavy_nice: int = Field(10, ge=0, le=19)
    """Niceness of heavy-job children: on a busy host the worker's loop, light
    jobs, the API and Redis get the CPU first."""
    concurrency: int = Field(16, ge=1)
    """Jobs one worker process holds at once (arq's max_jobs)."""
    processes: int = Field(1, ge=1)
    """`derender worker` processes on this host (one keeps about one core busy)."""
    switch_interval_ms: float = Field(1.0, gt=0)
    """The worker's `sys.setswitchinterval`: how long a thread keeps the GIL
    before the event loop or a light job may take it (Python's default is 5)."""
    poll_delay_s: float = Field(0.5, gt=0)
    """The longest an idle claim blocks in Redis (BLMOVE's timeout): how often
    an idle claim loop reports progress and notices shutdown."""
    heartbeat_s: float = Field(2.0, gt=0)
    max_tries: int = Field(3, ge=1)
    """Attempts at a job whose workers keep dying; then an error result."""
    drain_timeout_s: int = Field(30, ge=0)
    """On SIGTERM a worker stops taking jobs and gives held ones this long."""
    metrics_port: int = Field(9100, ge=0, le=65535)
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    request_timeout_s: float = Field(30.0, gt=0)
    """How long the API waits for a synchronous result before answering 504."""
    result_ttl_s: int = Field(600, ge=1)
    """Results of `/v1/jobs` (and undelivered ones) expire after this."""
    job_ttl_s: int = Field(3600, ge=1)
    held_text_ttl_s: int = Field(600, ge=1)
    """A stream's held text in Redis (wire/held_text.py) expires this long after
    it was last written or read: a stream idle longer cannot go on."""
    """A queued `/v1/jobs` job no worker started by then is dropped."""
    max_body_bytes: int = Field(64 * 2**20, ge=1024)
    """API: 413 before reading past it; workers enforce it on direct producers too."""
    max_queue_depth: int = Field(10_000, ge=0)
    """API answers 429 + Retry-After above this many queued jobs per model (0: no limit)."""
    max_inflight_bytes: int = Field(256 * 2**20, ge=0)
    """API: request and response bytes held at once, all clients together;
    a body beyond it is 503 + Retry-After (0: no limit). A request alone in
    flight is always admitted."""
    max_inflight_bytes_per_key: int = Field(0, ge=0)
    """API: the same, per API key (0: no limit)."""
    body_idle_timeout_s: float = Field(10.0, gt=0)
    """API: a request body that sends no bytes for this long, or a request head
    not complete this long after its first byte, is answered 408 and its
    connection closed."""
    owner_secret: str | None = None
    """HMAC key the API signs job owners with; every API process must share
    it. Unset: API processes share one generated on first use and kept in
    Redis (`{prefix}:owner-secret`), which no producer may read."""
    stream_secret: str | None = None
    """HMAC key for streaming derender states; every worker of a deployment
    must share it. Unset: workers share one generated on first start and kept
    in Redis (`{prefix}:stream-secret`)."""
    api_keys: str | None = None
    """`name:token,...` bearer tokens; unset: no authentication."""
    operator_keys: str | None = None
    """`name,...`: API keys (by name) whose holders see every client's job ids
    and error messages on the status page; other keys see only their own."""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_jobs: bool = False
    """Workers log every finished job at INFO (job id, request id, status, ms),
    not only failures; off by default: a line costs tens of microseconds of
    worker CPU per job (bench/log_cost.py)."""
    debug_job_delay_s: float = Field(0.0, ge=0)
    """Fault-injection tests only: each job waits this long (on the loop,
    not the CPU) before it is derendered, to hold jobs in flight."""

    @field_validator("compat")
    @classmethod
    def _check_compat(cls, value: str) -> str:
        profile(value)
        return value

    @field_validator("api_keys")
    @classmethod
    def _check_api_keys(cls, value: str | None) -> str | None:
        parse_api_keys(value)
        return value

    @field_validator("operator_keys")
    @classmethod
    def _check_operator_keys(cls, value: str | None, info: ValidationInfo) -> str | None:
        known = set(parse_api_keys(info.data.get("api_keys")).values())
        unknown = sorted(set(_items(value)) - known)
        if unknown:
            raise ValueError(f"names no key of DERENDER_API_KEYS: {', '.join(unknown)}")
        return value

    def api_key_names(self) -> dict[str, str]:
        return parse_api_keys(self.api_keys)

    def operator_names(self) -> frozenset[str]:
        return frozenset(_items(self.operator_keys))

    def redis_url_or_default(self) -> str:
        return self.redis_url or DEFAULT_REDIS_URL


def parse_api_keys(spec: str | None) -> dict[str, str]:
    """`name:token,...` -> {token: name}; a bare token is named by position."""
    keys: dict[str, str] = {}
    for i, item in enumerate(_items(spec)):
        name, sep, token = item.partition(":")
        if not sep:
            name, token = f"key{i + 1}", item
        if len(token) < 16:
            raise ValueError(f"API key {name!r} is shorter than 16 characters")
        keys[token] = name
    return keys


def _items(spec: str | None) -> list[str]:
    """A comma-separated setting's items, stripped, without empty ones."""
    return list(filter(None, (p.strip() for p in (spec or "").split(","))))


class SettingsError(ValueError):
    """Invalid settings, one line per bad value naming where it came from:
    `DERENDER_PORT='abc': Input should be a valid integer, ...` (or `--port=...`)."""


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment; explicit (CLI) values win when not None."""
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings.model_validate(given)
    except ValidationError as exc:
        raise SettingsError("\n".join(_describe(error, given) for error in exc.errors())) from None


def _describe(error: Any, flags: dict[str, object]) -> str:
    """One pydantic error as the operator wrote the value: the variable (or
    flag) name and the value, then pydantic's message without its prefix."""
    field = str(error["loc"][0]) if error["loc"] else ""
    name = f"--{field.replace('_', '-')}" if field in flags else f"DERENDER_{field.upper()}"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{name}={error['input']!r}: {message}"


def child_environment(settings: Settings, base: Mapping[str, str]) -> dict[str, str]:
    """`base` with every resolved setting as its `DERENDER_*` variable, so a
    child process (`derender run`'s worker, `derender worker --processes N`'s
    workers) gets exactly this process's settings, flags included."""
    env = {name: value for name, value in base.items() if not _is_setting(name)}
    for field in Settings.model_fields:
        value = getattr(settings, field)
        if value is not None:
            env[f"DERENDER_{field.upper()}"] = str(value).lower() if isinstance(value, bool) else str(value)
    return env


def _is_setting(variable: str) -> bool:
    name = variable.upper()
    return name.startswith("DERENDER_") and name[len("DERENDER_"):].lower() in Settings.model_fields
