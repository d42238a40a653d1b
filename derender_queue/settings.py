"""Every setting, from environment variables prefixed `DERENDER_`."""

from __future__ import annotations

from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DERENDER_", extra="ignore")

    models_config: Path | None = None
    """TOML models config; unset serves the built-in `deepseek-v4`."""


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment; explicit (CLI) values win when not None."""
    return Settings(**{k: v for k, v in overrides.items() if v is not None})
