"""`/v1/chat/completions/derender`: one generate response -> `chat.completion`."""

from __future__ import annotations

import time

from derender_queue.contract.requests import DerenderChatRequest
from derender_queue.contract.responses import ChatChoice, ChatCompletionResponse, ChatMessage
from derender_queue.errors import bad_request

from . import bounds, passthrough
from .detokenize import Detokenizer, seed_state
from .logprobs import TokenStrings, chat_logprobs
from .models import Model
from .options import chat_top_limit, check_chat_options, decode_options, parse_request
from .output_text import decode_choice
from .parsers import hides_token_metadata
from .parsing import ChatParsing
from .usage import prompt_count, usage

_PARSER_NEEDS_REQUEST = (
    "chat_request is required when a tool or reasoning parser is configured "
    "because plain detokenization would leak raw parser markup into content."
)


def derender_chat(request: DerenderChatRequest, model: Model, model_name: str) -> ChatCompletionResponse:
    gen = request.generate_response
    options = request.chat_request
    profile = model.config.profile
    parsing = None
    # vLLM's order: chat_request's validators (pydantic, while parsing the
    # body), bounds, prompt length, the parser's need of a request, empty
    # token_ids; then the checks only we make.
    if options is not None:
        check_chat_options(options)
        parse_req = parse_request(options, gen.prompt_token_ids, model)
        if model.parser_factory is not None:
            parsing = ChatParsing(model.parser_factory, parse_req)
    bounds.check_responses([gen], model)
    bounds.check_prompt_ids([request.prompt_token_ids], model)
    if model.parser_factory is not None and options is None:
        raise bad_request(_PARSER_NEEDS_REQUEST, param="chat_request")
    for choice in gen.choices:
        if not choice.token_ids:
            raise bad_request(f"choice {choice.index} has empty or null token_ids")
    bounds.check_vocab(request.prompt_token_ids or [], model, "prompt_token_ids")
    bounds.check_vocab(gen.prompt_token_ids or [], model, "generate_response.prompt_token_ids")
    bounds.check_own(gen.choices, model)
    opts = decode_options(options, model, preserve_special=parsing is not None)
    # Logprobs and token ids would leak hidden reasoning.
    hide_metadata = parsing is not None and hides_token_metadata(parsing.factory, parsing.request)
    detok = Detokenizer(model.vocab, opts.skip_special)
    seed_ids = request.prompt_token_ids if request.prompt_token_ids is not None else gen.prompt_token_ids
    seed = seed_state(model.vocab, seed_ids, opts.skip_special)
    strings = TokenStrings(model.vocab, opts.token_form)
    top_limit = chat_top_limit(options)
    choices = []
    for choice in gen.choices:
        ids = choice.token_ids or []  # never empty: checked above
        decoded = decode_choice(
            detok, seed, ids, choice.finish_reason, choice.stop_reason, opts.rules, model.eos
        )
        if parsing is not None:
            message, finish = parsing.message(decoded.text, ids, choice.finish_reason)
        else:
            message, finish = ChatMessage("assistant", decoded.text), choice.finish_reason or "stop"
        message.annotations = profile.null_extra
        logprobs = None
        if choice.logprobs is not None and not hide_metadata:
            logprobs = chat_logprobs(choice.logprobs, choice.index, strings, top_limit)
        keep_ids = opts.return_token_ids and not hide_metadata
        choices.append(
            ChatChoice(choice.index, message, logprobs, finish, decoded.stop_reason, ids if keep_ids else None)
        )
    prompt_tokens = prompt_count(request.prompt_tokens, gen, profile)
    completion_tokens = sum(len(c.token_ids or ()) for c in gen.choices)
    return ChatCompletionResponse(
        id=passthrough.response_id(gen.request_id),
        created=int(time.time()),
        model=model_name,
        choices=choices,
        usage=usage(prompt_tokens, completion_tokens, profile),
        prompt_logprobs=passthrough.prompt_logprobs(
            gen.prompt_logprobs, "generate_response", model.vocab if profile.decode_prompt_logprobs else None),
        prompt_token_ids=gen.prompt_token_ids if opts.return_token_ids else None,
        kv_transfer_params=gen.kv_transfer_params,
        metrics=passthrough.metrics(gen.metrics, "generate_response"),
    )
