"""Chat output parsers matching vLLM 0.33's non-streaming derender.

Supported names (as on vLLM's command line): reasoning ``deepseek_r1`` and
``deepseek_v4``; tool ``hermes`` (alias ``qwen3_json``) and ``deepseek_v4``;
and every name an engine family registers (``engine/``, ``families/``;
docs/parsers.md lists them); any combination.

Usage::

    factory = build_parser_factory("deepseek_v4", "deepseek_v4", vocab=vocab,
                                   enable_auto_tools=True,
                                   special_tokens=tokenizer_special_tokens)
    request = ParseRequest.from_body(body)          # may raise ParserInputError
    message = parse_message(factory, request, text, token_ids, "stop")

    # streaming: feed chunks, carry parser.to_state() between calls
    parser = factory(request)                       # or factory(request, state=s)
    delta = parser.feed(delta_text, delta_token_ids)
    ...
    last = parser.finish()

The text must be decoded with special tokens kept, as vLLM does whenever a
parser is configured.  Token ids are accepted but unused: vLLM's
non-streaming parse reads only the text.  The prompt ids
(``ParseRequest.prompt_token_ids``) matter only to engine families whose
prompt may already close reasoning (``qwen3``); a stream reads them once
(``ParserFactory.start_state``).

Semantics are vLLM's *non-streaming* ones, delivered incrementally: folding
all deltas of any chunking equals ``parse_message``.  Parser state
(``to_state()``) is JSON and holds, besides a few flags:

* a marker prefix the lexer holds back (shorter than the longest marker);
* whitespace whose fate is still open (trailing reasoning whitespace, a
  whitespace-only content prefix before possible tool calls);
* the tool call being parsed (deepseek_v4: raw name and arguments);
* text vLLM's rules decide only at the end of the output, which is the only
  part that can grow with the output:
  - deepseek_r1 before any ``<think>``: a later ``<think>`` would discard it;
  - hermes from the first ``<tool_call>``: one invalid call anywhere turns
    the whole output back into content;
  - deepseek_r1 + deepseek_v4 tools: from the first DSML marker until the
    first named invoke (without a call vLLM returns the raw content).
"""

from .deltas import DeltaAccumulator, ParsedDelta, ParsedMessage, ToolCallDelta
from .factory import (
    ParserFactory,
    build_parser_factory,
    hides_token_metadata,
    parse_message,
    resolve_finish_reason,
)
from .ids import stable_tool_call_id
from .passage import Passage
from .pipeline import ChatParser
from .request import ParseRequest, ParserInputError, resolve_chat_template_kwargs
from .stages import ParserSpec

__all__ = [
    "ChatParser",
    "DeltaAccumulator",
    "ParseRequest",
    "ParsedDelta",
    "ParsedMessage",
    "ParserFactory",
    "ParserInputError",
    "ParserSpec",
    "Passage",
    "ToolCallDelta",
    "build_parser_factory",
    "hides_token_metadata",
    "parse_message",
    "resolve_chat_template_kwargs",
    "resolve_finish_reason",
    "stable_tool_call_id",
]
