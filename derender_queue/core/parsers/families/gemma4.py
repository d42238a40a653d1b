"""Gemma 4: channel reasoning and ``call:`` tool calls in one engine (vLLM
0.34 ``parser/gemma4.py``, ``Gemma4Parser``; reasoning and tool name
``gemma4``).  ::

    <|channel>thought
    ...reasoning...<channel|>
    <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>

Output starts as content; ``<|channel>`` opens reasoning, ``<channel|>`` or
a ``<|tool_call>`` ends it.  A call's name runs from ``call:`` (or a bare
``:``) to ``{`` or ``(``; its arguments are Gemma's own key:value syntax,
strings between ``<|"|>`` delimiters (a special token whose text is kept),
everything else bare and kept as a string until the tool schema re-types it.

What ``Gemma4Parser`` adds in code, as ``Family`` hooks:

* ``_preprocess_feed`` (``Family.first_feed``): a pass's input without
  ``<|channel>`` that holds a ``<channel|>``, starts with ``thought\\n`` or
  is ``thought`` reads as if ``<|channel>`` came first.  vLLM's non-streaming
  parse feeds the whole input at once, so a ``<channel|>`` anywhere decides
  it: until a ``<|channel>`` shows (no marker) or the output ends, the
  input is held, all of it (an answer without channel markers streams only
  at its end).  The content of our own reasoning pass holds neither marker,
  so a tool pass behind it decides from its first characters (but for a
  marker that dropped special tokens splice together, ``<chan`` + a special
  token + ``nel|>``, which vLLM's tool pass would read as one).  It runs only
  when both channel markers are in the vocabulary (``for_vocab``).
* ``extract_reasoning`` (``Family.reasoning_prefix``): the reasoning loses a
  leading ``thought\\n``; a reasoning that is ``thought`` is None.
* ``enable_thinking`` only sets ``wait_for_reasoning``, which the
  non-streaming parse never reads; the output starts in content, and the
  prompt is not consulted (``adjust_initial_state_from_prompt`` runs in
  vLLM's stream only).

The argument converter is vLLM's ``_gemma4_arg_converter(raw, partial=False)``
re-read here: a trailing ``}`` (or an unbalanced ``)``) is the call's closer;
``key:value`` pairs, nested ``{...}`` objects and ``[...]`` arrays, a value
left open by the end of the text kept as far as it goes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..engine.family import Family
from ..engine.grammar import Event, Grammar, State, Transition
from ..engine.registry import register

CHANNEL_START, CHANNEL_END = "<|channel>", "<channel|>"
DELIM = '<|"|>'
THOUGHT = "thought\n"
_GAP = " ,\n\t"  # skipped before a key or an array item
_WS = " \n\t"  # skipped before a value


def _strip_open_delim(text: str) -> str:
    """A value cut by the end of a streamed prefix loses a partial delimiter."""
    for k in range(len(DELIM), 0, -1):
        if text.endswith(DELIM[:k]):
            return text[:-k]
    return text


def _skip(text: str, i: int, chars: str) -> int:
    while i < len(text) and text[i] in chars:
        i += 1
    return i


def _bracketed(text: str, i: int) -> tuple[str, int, bool]:
    """The body of the ``{`` or ``[`` at ``i``, the index after it and whether
    it closed; delimited strings are skipped whole."""
    opener = text[i]
    closer = "}" if opener == "{" else "]"
    start = i = i + 1
    depth, n = 1, len(text)
    while i < n and depth:
        if text.startswith(DELIM, i):
            end = text.find(DELIM, i + len(DELIM))
            i = n if end < 0 else end + len(DELIM)
            continue
        depth += (text[i] == opener) - (text[i] == closer)
        i += 1
    return (text[start : i - 1], i, True) if depth == 0 else (text[start:i], i, False)


def _nested(text: str, i: int) -> tuple[Any, int]:
    """A nested object or array; one the text leaves open is read as a
    streamed prefix."""
    parse = _object if text[i] == "{" else _array
    body, i, closed = _bracketed(text, i)
    return parse(body, partial=not closed), i


def _bare(text: str, i: int, stops: str, partial: bool) -> tuple[str | None, int]:
    """A bare value up to a stop character; None ends the parse (nothing
    there, or a streamed value that may still grow)."""
    start = i
    while i < len(text) and text[i] not in stops:
        i += 1
    if (partial and i >= len(text)) or i == start:
        return None, i
    value = text[start:i].strip()
    return (None, i) if partial and value.endswith(".") else (value, i)


def _object(text: str, *, partial: bool = False) -> dict[str, Any]:
    """Gemma's ``key:value,...`` (vLLM's ``_parse_gemma4_args``)."""
    out: dict[str, Any] = {}
    i, n = 0, len(text)
    while True:
        i = _skip(text, i, _GAP)
        colon = text.find(":", i) if i < n else -1
        if colon < 0:
            return out
        key = text[i:colon].strip()
        if key.startswith(DELIM) and key.endswith(DELIM):
            key = key[len(DELIM) : -len(DELIM)]
        i = _skip(text, colon + 1, _WS)
        if i >= n:
            if not partial:
                out[key] = ""
            return out
        if text.startswith(DELIM, i):
            end = text.find(DELIM, i + len(DELIM))
            if end < 0:
                value = text[i + len(DELIM) :]
                out[key] = _strip_open_delim(value) if partial else value
                return out
            out[key], i = text[i + len(DELIM) : end], end + len(DELIM)
        elif text[i] in "{[":
            out[key], i = _nested(text, i)
        else:
            bare, i = _bare(text, i, ",}]", partial)
            if bare is None:
                return out
            out[key] = bare


def _array(text: str, *, partial: bool = False) -> list[Any]:
    """Gemma's ``[item,...]`` (vLLM's ``_parse_gemma4_array``)."""
    out: list[Any] = []
    i, n = 0, len(text)
    while True:
        i = _skip(text, i, _GAP)
        if i >= n:
            return out
        if text.startswith(DELIM, i):
            end = text.find(DELIM, i + len(DELIM))
            if end < 0:
                out.append(text[i + len(DELIM) :])
                return out
            out.append(text[i + len(DELIM) : end])
            i = end + len(DELIM)
        elif text[i] in "{[":
            item, i = _nested(text, i)
            out.append(item)
        else:
            bare, i = _bare(text, i, ",]", partial)
            if bare is None:
                return out
            out.append(bare)


def gemma4_arguments(raw_args: str) -> str:
    """``_gemma4_arg_converter(raw_args, partial=False)``."""
    text = raw_args.strip()
    if text.endswith("}") or (text.endswith(")") and text.count("(") < text.count(")")):
        text = text[:-1]
    return json.dumps(_object(text), ensure_ascii=False)


def gemma4_first_feed(text: str, final: bool, own: bool) -> str | None:
    """``Gemma4Parser._preprocess_feed`` on the whole input: ``<|channel>``
    first when the input has none and holds a ``<channel|>``, starts with
    ``thought\\n`` or is ``thought``; None while more input could change it."""
    if not own:  # a channel marker may still come
        if CHANNEL_START in text:
            return ""
        if not final:
            return None
        return CHANNEL_START if CHANNEL_END in text or text.startswith(THOUGHT) or text == THOUGHT[:-1] else ""
    if text.startswith(THOUGHT):
        return CHANNEL_START
    if not final and THOUGHT.startswith(text):
        return None
    return CHANNEL_START if text == THOUGHT[:-1] else ""


def _never(kwargs: Mapping[str, Any]) -> bool:
    """The output starts in content whatever ``enable_thinking`` says."""
    return False


C, R, P, N, A = State.CONTENT, State.REASONING, State.TOOL_PREAMBLE, State.TOOL_NAME, State.TOOL_ARGS
_END = Transition(C, (Event.TOOL_CALL_END,))
_CALL = Transition(P, (Event.REASONING_END, Event.TOOL_CALL_START))

GRAMMAR = Grammar(
    name="gemma4",
    terminals={
        "THINK_START": CHANNEL_START, "THINK_END": CHANNEL_END,
        "TOOL_START": "<|tool_call>", "TOOL_END": "<tool_call|>",
        "CALL_PREFIX": "call:", "COLON": ":", "OPEN_BRACE": "{", "OPEN_PAREN": "(",
    },
    transitions={
        (C, "THINK_START"): Transition(R, (Event.REASONING_START,)),
        (R, "THINK_START"): Transition(R),  # a repeated opener is swallowed
        (R, "THINK_END"): Transition(C, (Event.REASONING_END,)),
        (R, "TOOL_START"): _CALL,  # a call ends reasoning
        (C, "TOOL_START"): _CALL,
        (P, "TOOL_END"): _END,
        (P, "CALL_PREFIX"): Transition(N),
        (P, "COLON"): Transition(N),  # a bare ":name{...}"
        (N, "OPEN_BRACE"): Transition(A),
        (N, "OPEN_PAREN"): Transition(A),
        (N, "TOOL_END"): _END,
        (A, "TOOL_END"): _END,
        (C, "TOOL_END"): Transition(C),  # stray closers are swallowed
        (C, "THINK_END"): Transition(C),
    },
    arg_converter=gemma4_arguments,
    preserve_tokens=frozenset({DELIM}),
)

_FAMILY = Family(
    name="gemma4",
    grammar=GRAMMAR,
    reasoning_names=("gemma4",),
    tool_names=("gemma4",),
    thinking=_never,
    turn_boundary_tokens=frozenset({"<|turn>", "<|tool_response>"}),
    token_id_terminals=frozenset({"THINK_START", "THINK_END", "TOOL_START", "TOOL_END"}),
    first_feed=gemma4_first_feed,
    reasoning_prefix=THOUGHT,
)
# _preprocess_feed needs both channel markers' token ids.
_WITHOUT_FEED = replace(_FAMILY, first_feed=None)

GEMMA4 = register(
    replace(
        _FAMILY,
        for_vocab=lambda vocab: _FAMILY if CHANNEL_START in vocab and CHANNEL_END in vocab else _WITHOUT_FEED,
    )
)
