"""Random parser cases for a family, the same in both virtualenvs (stdlib only).

A family's case module (``cases_<family>.py``) declares ``TOKENS`` (its test
tokenizer's special and added tokens), ``PAIRS`` (server parser configs:
reasoning, tool), ``TOOLS``, ``PROMPTS`` (prompt texts), ``HANDWRITTEN``
(outputs), ``output(rng)`` (one random output, well-formed or not) and
``BENCH`` (bench/stream.py: parsers and a tool call), and may add
``REQUESTS`` (request variants of its own, e.g. a thinking switch) and
``BENCH_OUTPUT`` (bench/stream.py: the model's own shape of a long output,
pieces of text around the ``REASONING`` and ``CONTENT`` slots; without it
the bench writes DeepSeek's ``<think>`` markers).  An
output is a list of pieces: a string is tokenized as it is, a
``["spell", s]`` piece in two parts so a marker like ``</think>`` comes out
of ordinary tokens (vLLM's streams treat that differently).

``build(family, seed, n)`` gives the handwritten outputs and ``n`` random ones,
each with a request variant, a prompt, a finish and a stream chunking seed;
every case runs under every pair.
"""

from __future__ import annotations

import importlib
import random
from pathlib import Path
from types import ModuleType
from typing import Any

Piece = str | list[str]
# The slots of a BENCH_OUTPUT: bench/stream.py fills them with the corpus' tokens.
REASONING, CONTENT = "\x00reasoning", "\x00content"


def request_variants(tools: list[dict[str, Any]], named: str) -> list[dict[str, Any]]:
    return [
        {},
        {"tools": tools},
        {"tools": tools, "tool_choice": "auto"},
        {"tools": tools, "tool_choice": "none"},
        {"tools": tools, "tool_choice": "required"},
        {"tools": tools, "tool_choice": {"type": "function", "function": {"name": named}}},
        {"tools": tools, "tool_choice": None},
        {"tools": tools, "parallel_tool_calls": False},
        {"tools": tools, "include_reasoning": False},
        {"tools": tools, "chat_template_kwargs": {"enable_thinking": False}},
        {"tools": tools, "reasoning_effort": "none"},
        {"tool_choice": "none"},
    ]


def family_module(family: str) -> ModuleType:
    return importlib.import_module(f"cases_{family}")


def families() -> list[str]:
    """Every family with a case module here."""
    return sorted(p.stem.removeprefix("cases_") for p in Path(__file__).parent.glob("cases_*.py"))


def text_of(pieces: list[Piece]) -> str:
    return "".join(p if isinstance(p, str) else p[1] for p in pieces)


def build(family: str, seed: int, n: int) -> list[dict[str, Any]]:
    mod = family_module(family)
    rng = random.Random(f"{family}:{seed}")
    variants = request_variants(mod.TOOLS, mod.TOOLS[0]["function"]["name"]) + list(getattr(mod, "REQUESTS", []))
    outputs: list[list[Piece]] = [list(h) for h in mod.HANDWRITTEN] + [mod.output(rng) for _ in range(n)]
    cases = []
    for i, pieces in enumerate(outputs):
        cases.append({
            "id": f"{family}-{seed}-{i}",
            "pieces": pieces,
            "request": variants[i % len(variants)] if i < len(mod.HANDWRITTEN) else rng.choice(variants),
            "prompt": mod.PROMPTS[i % len(mod.PROMPTS)] if i < len(mod.HANDWRITTEN) else rng.choice(mod.PROMPTS),
            "finish": rng.choice(["stop", "stop", "length"]),
            "chunk_seed": rng.randrange(1 << 30),
        })  # fmt: skip
    return cases


def chunk_lens(n_tokens: int, seed: int) -> list[int]:
    """Stream chunk sizes: 1 to 4 tokens each."""
    rng = random.Random(seed)
    out = []
    while n_tokens > 0:
        k = min(n_tokens, rng.randint(1, 4))
        out.append(k)
        n_tokens -= k
    return out


def words(rng: random.Random, pool: list[str], lo: int = 1, hi: int = 6) -> str:
    return "".join(rng.choice(pool) for _ in range(rng.randint(lo, hi)))


def truncate(rng: random.Random, pieces: list[Piece]) -> list[Piece]:
    """Cut the output at a random character (a max_tokens stop mid-markup)."""
    text = text_of(pieces)
    if not text:
        return pieces
    return [text[: rng.randint(0, len(text))]]
