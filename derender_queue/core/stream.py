"""Streaming derender: one generate SSE chunk plus the carried state in, one
OpenAI chunk plus the next state out (vLLM's `derender_chat_stream` /
`derender_completion_stream`, same bodies and chunk shapes, as the model's
compat profile answers).

Where it differs from vLLM, on purpose (docs/compatibility.md, "Streams"):

* every rule of the non-streaming path holds, so concatenating a stream's
  deltas gives exactly its result for any chunking: stop strings (vLLM
  refuses them), `min_tokens`, the dropped stop token, parsed fields,
  `finish_reason: tool_calls`, completion `text_offset`s (stream_text.py
  says what is held back for that);
* each chunk costs O(delta): the detokenizer window, the parser's own state
  and the logprob context travel in the state, nothing is replayed;
* the state is signed and bound to the request (stream_state.py); vLLM's
  own plain state is accepted to continue a stream it began, and answered
  in kind (vllm_state.py);
* streamed tool-call ids are stable for a retried chunk.

At most one choice per chunk, as vLLM: a client with `n > 1` runs one
stream per choice index.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

import msgspec

from derender_queue.compat import Profile
from derender_queue.contract.requests import ChatOptions, CompletionOptions
from derender_queue.contract.stream_requests import (
    ChatCompletionChunk,
    ChatStreamChoice,
    CompletionChunk,
    CompletionStreamChoice,
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    DerenderChatStreamRequest,
    DerenderChatStreamResponse,
    DerenderCompletionStreamRequest,
    DerenderCompletionStreamResponse,
    GenerateStreamChoice,
    GenerateStreamChunk,
    StreamStateIn,
    StreamStateOut,
)
from derender_queue.errors import bad_request

from . import bounds, passthrough, vllm_state
from . import stream_checks as checks
from .chat import _PARSER_NEEDS_REQUEST
from .chunk_body import ChunkDecoder
from .detokenize import DecodeState, Detokenizer, seed_state
from .logprobs import TokenStrings
from .models import Model
from .options import (
    chat_top_limit,
    check_chat_options,
    check_completion_options,
    completion_top_limit,
    decode_options,
    parse_request,
)
from .parsers import (
    ParseRequest,
    ParserFactory,
    ToolCallDelta,
    hides_token_metadata,
    resolve_finish_reason,
    stable_tool_call_id,
)
from .parsing import stream_start
from .stream_logprobs import chat_logprobs, completion_logprobs
from .stream_parse import Passing, parse_chunk
from .stream_state import ChoiceState, Keyed, StateCodec, bind_request, binding
from .stream_text import StreamText, TextState
from .usage import stream_usage
from .vllm_state import from_vllm, speaks_vllm

_NEEDS_PROMPT_IDS = (
    "prompt_token_ids is required when a tool or reasoning parser is configured. Without it "
    "parse_delta cannot tell whether the prompt left reasoning open (e.g. a chat template that "
    "pre-opens <think>) and would misclassify reasoning content as plain content."
)
_FINISHED = "stream_state belongs to a finished stream: its final chunk was already derendered"
_encoder = msgspec.json.Encoder()
_Choice = TypeVar("_Choice", ChatStreamChoice, CompletionStreamChoice)


class StreamRendered(NamedTuple):
    body: bytes
    completion_tokens: int


@dataclass(frozen=True)
class _Run:
    """What a request's options resolve to (vLLM's rules, checked once):
    the same for every chunk of a stream, so it is memoised by the options'
    encoding (a cache of derived values, not stream state)."""

    model: Model
    text: StreamText
    strings: TokenStrings
    """Logprob spellings in the request's form (`TokenStrings.shared`)."""
    top_limit: int | None
    return_token_ids: bool
    mac: Keyed
    """The state tag's HMAC with the binding but for the request id
    absorbed (StateCodec.keyed of stream_state.binding)."""
    factory: ParserFactory | None = None
    parse_request: ParseRequest | None = None
    hide_metadata: bool = False
    parser_ref: dict[str, Any] | None = None
    """A fresh parser's state: carried states keep only what differs from it."""
    passages: dict[bytes, Passing] = field(default_factory=dict)
    """Carried parser states (encoded) -> the text that leaves them as they
    are (parsers/passage.py): a chunk of such text skips resuming the parser."""
    growing: set[tuple[tuple[str, ...], str]] = field(default_factory=set)
    """Where the growing passages met so far keep their buffers (and held whitespace: stream_parse.py)."""

    @property
    def profile(self) -> Profile:
        return self.model.config.profile


# Runs remembered (count, options bytes), then all forgotten at once: a run holds several
# times its options' bytes (tools as Python objects), so the bound is on those bytes.
_RUNS_KEPT, _RUNS_KEPT_BYTES = 1024, 4 << 20


class StreamDerenderer:
    def __init__(self, secret: bytes | None = None) -> None:
        self.codec = StateCodec(secret)
        self.chunks = ChunkDecoder()  # bodies in: the `options_key` of chat() and completion()
        self._runs: dict[tuple[str, int, bytes], _Run] = {}
        self._runs_bytes = 0

    def _run(self, endpoint: str, model: Model, encoded: bytes, build: Callable[[Keyed], _Run]) -> _Run:
        """`encoded`: the options' `options_bytes` (ChunkDecoder's `options_key`)."""
        key = (endpoint, id(model), encoded)
        run = self._runs.get(key)
        if run is None:
            if len(self._runs) >= _RUNS_KEPT or self._runs_bytes + len(encoded) > _RUNS_KEPT_BYTES:
                self._runs, self._runs_bytes = {}, 0  # one swap: threads reading the old dict finish with it
            run = self._runs[key] = build(self.codec.keyed(binding(endpoint, model.name, encoded)))
            self._runs_bytes += len(encoded)
        return run

    # ------------------------------------------------------------- chat

    def chat(
        self, request: DerenderChatStreamRequest, model: Model, model_name: str, options_key: bytes
    ) -> StreamRendered:
        gen = request.generate_chunk
        options, factory = request.chat_request, model.parser_factory
        if factory is not None and options is None:
            raise bad_request(_PARSER_NEEDS_REQUEST, param="chat_request")
        if factory is not None and request.prompt_token_ids is None:
            raise bad_request(_NEEDS_PROMPT_IDS, param="prompt_token_ids")
        checks.check_one_choice(gen, "derender_chat_stream expects at most one choice per chunk (got {n}).")
        run = self._run("chat", model, options_key, lambda mac: _chat_run(model, options, mac))

        def wrap(choices: list[ChatStreamChoice], state: StreamStateOut) -> DerenderChatStreamResponse:
            return DerenderChatStreamResponse(ChatCompletionChunk(
                id=passthrough.response_id(gen.request_id), created=int(time.time()), model=model_name, choices=choices,
                usage=stream_usage(gen.usage, request.prompt_tokens, run.profile),
                prompt_token_ids=gen.prompt_token_ids if run.return_token_ids else None,
                metrics=_metrics(gen),
            ), state)

        return self._serve(request, run, self._chat_choice, wrap)

    def _serve(
        self, request: DerenderChatStreamRequest | DerenderCompletionStreamRequest, run: _Run,
        choose: Callable[[_Run, ChoiceState, GenerateStreamChoice, bytes], _Choice],
        wrap: Callable[[list[_Choice], StreamStateOut],
                       DerenderChatStreamResponse | DerenderCompletionStreamResponse],
    ) -> StreamRendered:
        """The chunk's choice (if any) from the carried state, then the
        answer with the next state (the same one, for a chunk without choice)."""
        gen = request.generate_chunk
        checks.check_choices(gen, run.model)
        rid = bind_request(gen.request_id)
        state, opaque = self._state(request, gen, run, rid)
        n_tokens = checks.n_tokens(gen)
        checks.check_length(request.prompt_token_ids, state.text.fed + state.text.held_id, n_tokens, run.model)
        choices: list[_Choice] = []
        if gen.choices:
            _claim(state, gen.choices[0])
            choices.append(choose(run, state, gen.choices[0], rid))
            opaque = None
        state_out = StreamStateOut(opaque or self.codec.seal(state, run.mac, rid))
        if speaks_vllm(request.stream_state):  # a stream vLLM began: its fields too
            assert request.stream_state is not None  # (speaks_vllm says so)
            delta_ids = (gen.choices[0].token_ids or []) if gen.choices else []
            vllm_state.write(state_out, request.stream_state, state, choices[0] if choices else None, delta_ids,
                             run.factory is not None, run.profile, run.model.vocab)
        return StreamRendered(_encoder.encode(wrap(choices, state_out)), n_tokens)

    @staticmethod
    def _chat_choice(run: _Run, s: ChoiceState, choice: GenerateStreamChoice, rid: bytes) -> ChatStreamChoice:
        ids = choice.token_ids or []
        final = choice.finish_reason is not None
        fed = s.text.fed
        text, stop_reason = run.text.step(s.text, ids, choice.finish_reason, choice.stop_reason)
        delta = DeltaMessage()
        if run.factory is not None:
            parsed = parse_chunk(run, s, text, ids, final)
            delta.reasoning, delta.content = parsed.reasoning, parsed.content
            if parsed.tool_calls:
                delta.tool_calls = [_tool_call(tc, (rid, choice.index, fed)) for tc in parsed.tool_calls]
                s.calls = True
            finish = resolve_finish_reason(choice.finish_reason, run.parse_request, s.calls) if final else None
        else:
            delta.content = text or None  # as vLLM: no text, no content
            s.content_sent = s.content_sent or bool(text) or final  # unread; kept so states keep their bytes
            finish = choice.finish_reason
        if not s.role_sent:
            delta.role, s.role_sent = "assistant", True
        logprobs = None
        if choice.logprobs is not None and not run.hide_metadata:
            logprobs = chat_logprobs(run.strings, run.top_limit, s, choice)
        s.done = final
        keep_ids = run.return_token_ids and not run.hide_metadata
        return ChatStreamChoice(
            choice.index, delta, logprobs, finish, stop_reason, choice.token_ids if keep_ids else None
        )

    # ------------------------------------------------------- completion

    def completion(
        self, request: DerenderCompletionStreamRequest, model: Model, model_name: str, options_key: bytes
    ) -> StreamRendered:
        gen = request.generate_chunk
        checks.check_one_choice(gen, "derender_completion_stream expects at most one choice per chunk")
        bounds.check_prompt_ids([request.prompt_token_ids], model)
        options = request.completion_request
        run = self._run("completion", model, options_key, lambda mac: _completion_run(model, options, mac))

        def choose(run: _Run, s: ChoiceState, choice: GenerateStreamChoice, rid: bytes) -> CompletionStreamChoice:
            fresh = s.text.fed == 0 and not s.text.tokens  # nothing decoded yet, no prompt seed
            before = DecodeState(list(s.text.tokens), s.text.prefix, s.text.read)
            text, stop_reason = run.text.step(s.text, choice.token_ids or [], choice.finish_reason, choice.stop_reason)
            final = choice.finish_reason is not None
            detok = run.text.detok
            logprobs = completion_logprobs(run.strings, run.top_limit, s, choice, final, fresh, detok, before)
            s.done = final
            keep = run.return_token_ids
            return CompletionStreamChoice(
                choice.index, text, logprobs, choice.finish_reason, stop_reason,
                gen.prompt_token_ids if keep else None, choice.token_ids if keep else None,
            )

        def wrap(choices: list[CompletionStreamChoice], state: StreamStateOut) -> DerenderCompletionStreamResponse:
            return DerenderCompletionStreamResponse(CompletionChunk(
                id=passthrough.response_id(gen.request_id), created=int(time.time()), model=model_name, choices=choices,
                usage=stream_usage(gen.usage, request.prompt_tokens, run.profile), metrics=_metrics(gen),
            ), state)

        return self._serve(request, run, choose, wrap)

    # ------------------------------------------------------------ state

    def _state(
        self, request: DerenderChatStreamRequest | DerenderCompletionStreamRequest, gen: GenerateStreamChunk,
        run: _Run, rid: bytes,
    ) -> tuple[ChoiceState, str | None]:
        """The carried state (and its opaque form when it is ours, to hand
        back unchanged on a chunk without a choice), or a fresh one."""
        carried: StreamStateIn | None = request.stream_state
        if carried is not None and carried.opaque is not None:
            return self.codec.open(carried.opaque, run.mac, rid), carried.opaque
        # Prompt ids are read only here (the seed); later chunks only echo them.
        bounds.check_vocab(request.prompt_token_ids or [], run.model, "prompt_token_ids")
        bounds.check_vocab(gen.prompt_token_ids or [], run.model, "generate_chunk.prompt_token_ids")
        seed_ids = request.prompt_token_ids if request.prompt_token_ids is not None else gen.prompt_token_ids
        parse_ids = gen.prompt_token_ids or request.prompt_token_ids
        start = stream_start(run.factory, run.parse_request, parse_ids, run.parser_ref)
        if carried is None:
            return ChoiceState(text=_seeded(run, seed_ids), parser=start), None
        state = from_vllm(carried, run.model.vocab)
        if run.factory is not None:
            state.parser = start
            # vLLM's parser path replays its output every chunk; replay it once here.
            prior = len(carried.output_token_ids)
            checks.check_length(request.prompt_token_ids, prior, checks.n_tokens(gen), run.model)
            bounds.check_vocab(carried.output_token_ids, run.model, "stream_state.output_token_ids")
            state.text = _seeded(run, seed_ids)
            text, _ = run.text.step(state.text, carried.output_token_ids, None, None)
            calls = parse_chunk(run, state, text, carried.output_token_ids, False).tool_calls
            state.calls = state.calls or bool(calls)
        return state, None


def _chat_run(model: Model, options: ChatOptions | None, mac: Keyed) -> _Run:
    factory = model.parser_factory
    parse_req = None
    if options is not None:
        check_chat_options(options)
        # No prompt ids in the memo: a parser that reads them gets them once (stream_start).
        parse_req = parse_request(options, None, model)
    opts = decode_options(options, model, preserve_special=factory is not None)
    text = StreamText(Detokenizer(model.vocab, opts.skip_special), opts.rules, model.eos)
    strings = TokenStrings.shared(model.vocab, opts.token_form)
    common = (model, text, strings, chat_top_limit(options), opts.return_token_ids, mac)
    if factory is None:
        return _Run(*common)
    assert parse_req is not None  # chat() refuses a parser without chat_request
    ref = factory(parse_req).to_state()
    return _Run(*common, factory, parse_req, hides_token_metadata(factory, parse_req), ref)


def _completion_run(model: Model, options: CompletionOptions | None, mac: Keyed) -> _Run:
    if options is not None:
        check_completion_options(options)
    opts = decode_options(options, model)
    text = StreamText(Detokenizer(model.vocab, opts.skip_special), opts.rules, model.eos)
    strings = TokenStrings.shared(model.vocab, opts.token_form)
    return _Run(model, text, strings, completion_top_limit(options), opts.return_token_ids, mac)


def _seeded(run: _Run, seed_ids: list[int] | None) -> TextState:
    seed = seed_state(run.model.vocab, seed_ids, bool(run.text.detok.skip))
    return TextState(seed.tokens, seed.prefix, seed.read)


def _claim(state: ChoiceState, choice: GenerateStreamChoice) -> None:
    """A state serves one choice, and nothing after its final chunk."""
    if state.index is None:
        state.index = choice.index
    elif state.index != choice.index:
        raise bad_request(
            f"stream_state belongs to choice {state.index}, not choice {choice.index}", param="stream_state"
        )
    if state.done:
        raise bad_request(_FINISHED, param="stream_state")


def _tool_call(tc: ToolCallDelta, where: tuple[bytes, int, int]) -> DeltaToolCall:
    """`where`: the request id (as bound), the choice, the ids fed before
    this chunk; a call's id is drawn from them and its index, so a retried
    chunk with the same state gives the same ids (vLLM draws them at random)."""
    function = None
    if tc.name is not None or tc.arguments is not None:
        function = DeltaFunctionCall(tc.name, tc.arguments)
    call_id = None if tc.id is None else stable_tool_call_id(*where, tc.index)
    return DeltaToolCall(call_id, "function" if tc.id is not None else None, tc.index, function)


def _metrics(gen: GenerateStreamChunk) -> msgspec.Raw:
    return passthrough.metrics(gen.metrics, "generate_chunk")

