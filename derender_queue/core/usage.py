"""A response's `usage`, as the model's release counts and spells it."""

from __future__ import annotations

from derender_queue.compat import Profile
from derender_queue.contract.requests import GenerateResponse, UsageInfo
from derender_queue.contract.responses import Usage


def prompt_count(given: int | None, gen: GenerateResponse, profile: Profile) -> int:
    """Non-streaming: the request's `prompt_tokens`, else (0.34) the generate
    response's own count, else 0."""
    if given is not None:
        return given
    if profile.prompt_tokens_from_usage and gen.usage is not None:
        return gen.usage.prompt_tokens or 0
    return 0


def usage(prompt_tokens: int, completion_tokens: int, profile: Profile) -> Usage:
    return Usage(prompt_tokens, prompt_tokens + completion_tokens, completion_tokens, profile.null_extra)


def stream_usage(given: UsageInfo | None, prompt_tokens: int | None, profile: Profile) -> Usage | None:
    """A stream's usage chunk: the generate stage's counts, the request's
    prompt count if given (both releases)."""
    if given is None:
        return None
    prompt = prompt_tokens if prompt_tokens is not None else (given.prompt_tokens or 0)
    return usage(prompt, given.completion_tokens or 0, profile)
