"""Served models: the tables of each model the models config names, loaded once.

Only configured models can be loaded (`derender_queue.models_config`); a
request names a model by its served name, never by a path.
"""

from __future__ import annotations

import gc
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

from derender_queue.errors import DerenderError
from derender_queue.models_config import PACKAGE_PREFIX, ModelConfig

from .output_text import EosIds
from .parsers import ParserFactory, build_parser_factory
from .vocab import Vocab, load_vocab


def resolve_tokenizer_path(spec: str) -> Path:
    """`package:NAME` is the folder of an installed tokenizer package."""
    if spec.startswith(PACKAGE_PREFIX):
        module = spec[len(PACKAGE_PREFIX) :]
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


def load_model(config: ModelConfig, vocabs: dict[Path, Vocab]) -> Model:
    """Load one model; `vocabs` shares tables between models of one tokenizer."""
    path = resolve_tokenizer_path(config.tokenizer).resolve()
    vocab = vocabs.get(path)
    if vocab is None:
        vocab = vocabs[path] = load_vocab(path)
        vocab.warm()
    primary = vocab.eos_token_id
    eos_ids = frozenset(config.eos_token_ids) | ({primary} if primary is not None else set())
    factory = None
    if config.reasoning_parser or config.tool_parser:
        factory = build_parser_factory(
            config.reasoning_parser,
            config.tool_parser,
            vocab=vocab.token_to_id,
            enable_auto_tools=config.enable_auto_tools,
            special_tokens=[vocab.pieces[i] for i in sorted(vocab.special_ids)],
            encode=lambda text: vocab.tokenizer.encode(text, add_special_tokens=False).ids,
            response_template=vocab.response_template,
            # vLLM decodes the prompt with special tokens kept and clean_up_tokenization_spaces off.
            decode=lambda ids: vocab.tokenizer.decode(ids, skip_special_tokens=False),
        )
    return Model(config, vocab, EosIds(primary, eos_ids), factory)


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
