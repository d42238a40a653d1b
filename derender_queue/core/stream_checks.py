"""What a streamed chunk must satisfy before it is derendered (vLLM's
checks, in its words, and the ones only we make)."""

from __future__ import annotations

from derender_queue.contract.stream_requests import GenerateStreamChunk
from derender_queue.errors import bad_request

from . import bounds
from .models import Model


def check_one_choice(gen: GenerateStreamChunk, message: str) -> None:
    """`message` may name the count as `{n}` (formatted only on failure)."""
    if len(gen.choices) > 1:
        raise bad_request(message.format(n=len(gen.choices)), param="generate_chunk.choices")


def check_length(prompt_ids: list[int] | None, prior: int, delta: int, model: Model) -> None:
    """vLLM's bound on the whole stream: prompt + output so far + this delta."""
    prompt = len(prompt_ids) if prompt_ids is not None else 0
    limit = model.config.max_model_len
    if prompt + prior + delta > limit:
        raise bad_request(
            f"prompt_token_ids length ({prompt}) plus output_token_ids length ({prior}) plus "
            f"delta ({delta}) exceeds max_model_len ({limit})."
        )


def check_choices(gen: GenerateStreamChunk, model: Model) -> None:
    """Ids inside the vocabulary and logprobs inside their bounds (ours:
    vLLM's streaming derender checks neither)."""
    for choice in gen.choices:
        bounds.check_choice(choice, model)
    bounds.check_own(gen.choices, model)


def n_tokens(gen: GenerateStreamChunk) -> int:
    """The chunk's ids (it has at most one choice: `_check_one_choice`)."""
    return len(gen.choices[0].token_ids or ()) if gen.choices else 0
