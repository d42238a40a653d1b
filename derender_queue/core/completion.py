"""`/v1/completions/derender`: one generate response per prompt -> `text_completion`.

Choice indexes run flat across the responses and usage is summed, as vLLM
does for multi-prompt completions.
"""

from __future__ import annotations

import time

from derender_queue.contract.requests import DerenderCompletionRequest, GenerateLogProbs
from derender_queue.contract.responses import CompletionChoice, CompletionLogProbs, CompletionResponse
from derender_queue.contract.types import NULL
from derender_queue.errors import bad_request

from . import bounds, passthrough
from .detokenize import DecodeState, Detokenizer, seed_state
from .logprobs import (
    TokenStrings,
    checked,
    completion_logprobs,
    emission_offsets,
    placeholder_offsets,
    text_start,
    walk_offsets,
)
from .models import Model
from .options import check_completion_options, completion_top_limit, decode_options
from .output_text import DecodedText, decode_choice
from .usage import prompt_count, usage


def derender_completion(
    request: DerenderCompletionRequest, model: Model, model_name: str
) -> CompletionResponse:
    responses = request.generate_responses
    options = request.completion_request
    profile = model.config.profile
    # vLLM's order (see chat.py), then the checks only we make.
    if options is not None:
        check_completion_options(options)
    if not responses:
        raise bad_request("generate_responses must not be empty")
    for name in ("prompt_tokens", "prompt_token_ids"):
        values = getattr(request, name)
        if values is not None and len(values) != len(responses):
            raise bad_request(
                f"{name} length ({len(values)}) must equal generate_responses length ({len(responses)})",
                param=name,
            )
    bounds.check_responses(responses, model)
    bounds.check_prompt_ids(request.prompt_token_ids or (), model)
    for gen in responses:
        for choice in gen.choices:
            if not choice.token_ids:
                raise bad_request(f"choice {choice.index} in response {gen.request_id} has empty or null token_ids")
    for ids in request.prompt_token_ids or ():
        bounds.check_vocab(ids or [], model, "prompt_token_ids")
    for gen in responses:
        bounds.check_vocab(gen.prompt_token_ids or [], model, "generate_responses.prompt_token_ids")
        bounds.check_own(gen.choices, model)
    opts = decode_options(options, model)
    detok = Detokenizer(model.vocab, opts.skip_special)
    strings = TokenStrings(model.vocab, opts.token_form)
    top_limit = completion_top_limit(options)
    seeds = request.prompt_token_ids or [None] * len(responses)
    counts = request.prompt_tokens
    if counts is None:
        counts = [prompt_count(None, gen, profile) for gen in responses]
    choices: list[CompletionChoice] = []
    completion_tokens = 0
    for gen, seed_override in zip(responses, seeds, strict=False):
        seed_ids = seed_override if seed_override is not None else gen.prompt_token_ids
        seed = seed_state(model.vocab, seed_ids, opts.skip_special)
        prompt_logprobs = NULL
        if profile.decode_prompt_logprobs:
            prompt_logprobs = passthrough.prompt_logprobs(gen.prompt_logprobs, "generate_responses", model.vocab)
        for choice in gen.choices:
            ids = choice.token_ids or []  # never empty: checked above
            decoded = decode_choice(
                detok, seed, ids, choice.finish_reason, choice.stop_reason, opts.rules, model.eos
            )
            logprobs = None
            if choice.logprobs is not None:
                logprobs = _logprobs(choice.logprobs, choice.index, decoded, strings, top_limit, detok, seed)
            keep = opts.return_token_ids
            choices.append(
                CompletionChoice(
                    index=len(choices),
                    text=decoded.text,
                    logprobs=logprobs,
                    finish_reason=choice.finish_reason,
                    stop_reason=decoded.stop_reason,
                    token_ids=ids if keep else None,
                    prompt_logprobs=prompt_logprobs,
                    prompt_token_ids=gen.prompt_token_ids if keep else None,
                )
            )
            completion_tokens += len(ids)
    prompt_tokens = sum(counts)
    first = responses[0]
    # vLLM keeps `kv_transfer_params` only when every response agrees.
    kv_params = first.kv_transfer_params
    if any(g.kv_transfer_params != kv_params for g in responses[1:]):
        kv_params = None
    return CompletionResponse(
        id=passthrough.response_id(first.request_id),
        created=int(time.time()),
        model=model_name,
        choices=choices,
        usage=usage(prompt_tokens, completion_tokens, profile),
        kv_transfer_params=kv_params,
        # Metrics describe one prompt; several cannot be merged (as vLLM).
        metrics=passthrough.metrics(first.metrics, "generate_responses[0]") if len(responses) == 1 else NULL,
    )


def _logprobs(
    logprobs: GenerateLogProbs, index: int, decoded: DecodedText, strings: TokenStrings,
    top_limit: int | None, detok: Detokenizer, seed: DecodeState,
) -> CompletionLogProbs:
    content = logprobs.content
    if content is None:
        return CompletionLogProbs([], [], [], [])
    vocab = strings.vocab

    def build() -> CompletionLogProbs:
        ids: list[int] = [e.token_id for e in content]  # type: ignore[misc]  # a None id: TypeError, checked() 400s
        limit = len(decoded.text)
        if strings.form == "placeholder":
            offsets = placeholder_offsets(ids)[0]
        elif vocab.byte_level:
            starts = walk_offsets(vocab, ids, detok.skip, text_start(vocab, ids, detok.skip, bool(seed.tokens)))[0]
            offsets = [min(max(c, 0), limit) for c in starts]
        else:
            offsets = [min(c, limit) for c in emission_offsets(detok, seed, ids)[0]]
        return completion_logprobs(content, strings, top_limit, offsets)

    return checked(build, content, vocab.size, index)

