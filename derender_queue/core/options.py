"""What a derender request's original chat/completion request asks for,
resolved once per request the way vLLM's derender reads it."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from derender_queue.contract.requests import ChatOptions, CompletionOptions
from derender_queue.errors import DerenderError, bad_request

from .logprobs import TokenForm
from .models import Model
from .output_text import StopRules
from .parsers import ParseRequest, ParserInputError

Options = ChatOptions | CompletionOptions


@dataclass(frozen=True)
class DecodeOptions:
    skip_special: bool
    rules: StopRules
    token_form: TokenForm
    return_token_ids: bool


def decode_options(options: Options | None, model: Model, preserve_special: bool = False) -> DecodeOptions:
    """vLLM's `_decode_params` and `_stop_strings`, plus our token spelling.

    `spaces_between_special_tokens` only matters for slow (non-`tokenizers`)
    tokenizers in vLLM, so it has no effect here.
    """
    rules = StopRules()
    if options is not None:
        stop = options.stop
        # vLLM's `_stop_strings`: a bare "" is no stop string, like "" in a list.
        rules = StopRules(
            stop=tuple(s for s in ([stop] if isinstance(stop, str) else stop or ()) if s),
            stop_token_ids=frozenset(options.stop_token_ids or ()),
            include_stop_str_in_output=options.include_stop_str_in_output,
            ignore_eos=options.ignore_eos,
            min_tokens=options.min_tokens,
        )
    return DecodeOptions(
        skip_special=not preserve_special and (options is None or options.skip_special_tokens is not False),
        rules=rules,
        token_form=token_form(options, model),
        return_token_ids=options is not None and bool(options.return_token_ids),
    )


def token_form(options: Options | None, model: Model) -> TokenForm:
    """`return_tokens_as_token_ids` (the request's, else the model's) spells
    `token_id:N`, with raw bytes or, as 0.34 does, `bytes: null`."""
    config = model.config
    flag = options.return_tokens_as_token_ids if options is not None else None
    if flag if flag is not None else config.return_tokens_as_token_ids:
        return "token_id" if config.profile.placeholder_tokens == "ours" else "placeholder"
    return (options.token_string_form if options is not None else None) or config.token_strings


def chat_top_limit(options: ChatOptions | None) -> int | None:
    """vLLM's `chat_top_logprobs_limit`; None keeps every candidate."""
    if options is None or not options.logprobs or options.logprob_token_ids or options.top_logprobs == -1:
        return None
    return options.top_logprobs or 0


def completion_top_limit(options: CompletionOptions | None) -> int | None:
    """vLLM's `completion_top_logprobs_limit` (`logprobs + 1`, OpenAI's rule)."""
    if options is None or options.logprob_token_ids or options.logprobs is None or options.logprobs == -1:
        return None
    return max(options.logprobs + 1, 0)


def _invalid(message: str, param: str, value: object = None) -> DerenderError:
    """vLLM's VLLMValidationError wording: `msg (parameter=p[, value=v])`."""
    detail = f"parameter={param}" + (f", value={value}" if value is not None else "")
    return bad_request(f"{message} ({detail})", param=param)


def check_chat_options(options: ChatOptions) -> None:
    """The ChatCompletionRequest validators that bear on derender, in vLLM's words."""
    if options.logprob_token_ids and not options.logprobs:
        raise _invalid("when using `logprob_token_ids`, `logprobs` must be set to true.", "logprob_token_ids")
    top = options.top_logprobs
    if top is not None:
        if top < 0 and top != -1:
            raise _invalid("`top_logprobs` must be a positive value or -1.", "top_logprobs", top)
        if (top == -1 or top > 0) and not options.logprobs:
            raise _invalid("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs")


def parse_request(options: ChatOptions, prompt_token_ids: list[int] | None, model: Model) -> ParseRequest:
    """What the parsers read, checked as the model's release checks tool
    usage (run for every chat request, parser or not)."""
    try:
        return ParseRequest.from_body(
            msgspec.to_builtins(options), prompt_token_ids=prompt_token_ids, profile=model.config.profile
        )
    except ParserInputError as exc:
        raise _invalid(str(exc), exc.parameter or "tools") from None


def check_completion_options(options: CompletionOptions) -> None:
    if options.logprob_token_ids and options.logprobs is None:
        raise _invalid("when using `logprob_token_ids`, `logprobs` must be set.", "logprob_token_ids")
    if options.logprobs is not None and options.logprobs < 0 and options.logprobs != -1:
        raise _invalid("`logprobs` must be a positive value or -1.", "logprobs", options.logprobs)
