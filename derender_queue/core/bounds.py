"""Resource bounds, checked before any decoding, in vLLM's words.

vLLM's `_validate_derender_bounds` plus what it leaves unchecked: ids outside
the vocabulary (vLLM silently decodes them to "") and logprobs for more
positions than there are tokens. `top_logprobs` may hold `max_logprobs + 1`
entries (the sampled token plus the top `max_logprobs`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from derender_queue.contract.requests import GenerateChoice, GenerateResponse
from derender_queue.contract.types import is_null
from derender_queue.errors import bad_request

from .models import Model


def check_responses(responses: list[GenerateResponse], model: Model) -> None:
    cfg = model.config
    if len(responses) > cfg.max_sequences:
        raise bad_request(
            f"generate_responses count ({len(responses)}) exceeds server maximum "
            f"({cfg.max_sequences}). Set VLLM_MAX_N_SEQUENCES to increase this limit."
        )
    for gen in responses:
        if len(gen.choices) > cfg.max_sequences:
            raise bad_request(
                f"choices count ({len(gen.choices)}) in response '{gen.request_id}' "
                f"exceeds server maximum ({cfg.max_sequences})."
            )
        for choice in gen.choices:
            check_choice(choice, model)
        if not is_null(gen.prompt_logprobs):
            count = len(msgspec.json.decode(gen.prompt_logprobs) or ())
            if count > cfg.max_model_len:
                raise bad_request(
                    f"prompt_logprobs length ({count}) in response '{gen.request_id}' "
                    f"exceeds max_model_len ({cfg.max_model_len})."
                )


def check_choice(choice: GenerateChoice, model: Model) -> None:
    """vLLM's bounds on one choice's token_ids and logprobs (a streaming
    chunk carries one). Ours (`check_own`) run after every check vLLM
    makes, so an error vLLM reports is the one reported."""
    cfg = model.config
    ids = choice.token_ids
    if ids and len(ids) > cfg.max_model_len:
        raise bad_request(
            f"token_ids length ({len(ids)}) in choice {choice.index} exceeds "
            f"max_model_len ({cfg.max_model_len})."
        )
    content = choice.logprobs.content if choice.logprobs else None
    if content and len(content) > cfg.max_model_len:
        raise bad_request(
            f"logprobs.content length ({len(content)}) in choice {choice.index} exceeds "
            f"max_model_len ({cfg.max_model_len})."
        )
    if content and cfg.max_logprobs >= 0:
        # The engine lists the sampled token first, then its top-k, so a top-k
        # position holds up to k + 1 candidates (vLLM's derender refuses its own
        # engine's top-20 output here; we allow the sampled one on top).
        limit = cfg.max_logprobs + 1
        widths = [len(e.top_logprobs or ()) for e in content]
        if max(widths) > limit:
            first = next(n for n in widths if n > limit)
            raise bad_request(
                f"top_logprobs count ({first}) in choice {choice.index} exceeds "
                f"max_logprobs ({cfg.max_logprobs})."
            )


def check_own(choices: Sequence[GenerateChoice], model: Model) -> None:
    """What vLLM leaves unchecked, per choice: ids outside the vocabulary
    and more logprob positions than tokens."""
    for choice in choices:
        content = choice.logprobs.content if choice.logprobs else None
        ids = choice.token_ids
        if content and len(content) > len(ids or ()):
            raise bad_request(
                f"logprobs.content length ({len(content)}) in choice {choice.index} exceeds "
                f"its token_ids length ({len(ids or ())}).",
                param="logprobs",
            )
        if ids and max(ids) >= model.vocab.size:  # the message is built only for a bad id
            check_vocab(ids, model, f"choice {choice.index} token_ids")


def check_prompt_ids(prompt_ids: Iterable[list[int] | None], model: Model) -> None:
    """vLLM's length bound (our vocabulary check is `check_vocab`'s)."""
    max_len = model.config.max_model_len
    for ids in prompt_ids:
        if ids is not None and len(ids) > max_len:
            raise bad_request(f"prompt_token_ids length ({len(ids)}) exceeds max_model_len ({max_len}).")


def check_vocab(ids: list[int], model: Model, where: str) -> None:
    """A 400 naming the first id outside the vocabulary."""
    size = model.vocab.size
    if ids and max(ids) >= size:
        bad = next(i for i in ids if i >= size)
        raise bad_request(
            f"token id {bad} in {where} is outside the vocabulary of model "
            f"'{model.name}' (vocab size {size}).",
            param=where,
        )
