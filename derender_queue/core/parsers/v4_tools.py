"""``deepseek_v4`` tool calls: the engine's tool pass over the content.

vLLM re-runs its DeepSeek V4 engine over the reasoning-stripped content,
starting in content mode (``extract_tool_calls_from_content``).  This is that
pass as a state machine:

``content`` -> (``<｜DSML｜tool_calls>``) ``preamble`` -> (``<｜DSML｜invoke
name="``) ``name`` -> (``">``) ``args`` -> (``</｜DSML｜invoke>`` or the block
closer) ``between`` -> next invoke ...  Once in the tool states the pass never
returns to content: text after the block is dropped.  ``<think>`` in content
still opens (discarded) reasoning unless no reasoning parser is configured.

Content is the text before the first tool marker.  It is ``None`` when it is
only whitespace and a tool call was started, which is why a whitespace-only
prefix is held.  In vLLM's "legacy" composition (a non-engine reasoning
parser such as ``deepseek_r1`` in front) a turn without tool calls returns
the *raw* content instead, so from the first marker on both the raw text and
the engine's content are held until the first accepted call decides.

A call's header (id, name) streams as soon as its name is complete; its
arguments are emitted whole when the invoke closes, because later
parameters, schema coercion and wrapper-unwrapping can rewrite earlier JSON.

State bound: the lexer's held prefix (< 20 chars), the current invoke's raw
name and arguments, a whitespace-only content prefix, in legacy mode the
undecided tail since the first marker, and one digest per wrapper-shaped
call (``{"arguments": ...}``), needed to mirror vLLM's lookup of the function
name by identical raw arguments.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from . import v4_grammar as g
from .buffer import TextBuffer
from .deltas import DeltaBuilder, ParsedDelta, ToolCallDelta
from .dsml import (
    is_wrapper_shaped,
    name_and_args_from_json,
    name_from_args,
    parse_params,
    unwrap_wrapper_args,
)
from .ids import make_tool_call_id
from .lexer import LiteralLexer
from .schema import Tools, fix_arg_types

_CONTENT, _REASONING, _PREAMBLE = "content", "reasoning", "preamble"
_NAME, _ARGS, _BETWEEN = "name", "args", "between"

_STATE_DEFAULTS: dict[str, Any] = {
    "mode": _CONTENT,
    "held": "",
    "slot_started": False,
    "n_calls": 0,
    "name": "",
    "args": "",
    "header_index": None,
    "wrappers": {},
    # content gate
    "ws": "",
    "nonws": False,
    "diverged": False,
    "resolved": False,
    "raw_tail": "",
    "c_tail": "",
}


class V4ToolStage:
    def __init__(
        self,
        lexer: LiteralLexer,
        *,
        tools: Tools,
        suppress: bool,
        skip_reasoning: bool,
        legacy: bool,
        state: dict[str, Any] | None = None,
    ) -> None:
        self._lexer = lexer
        self._tools = tools
        # tool_choice "none" with tools: markup is parsed, calls are dropped.
        self._suppress = suppress
        # No reasoning parser configured: think markers are plain content.
        self._skip_reasoning = skip_reasoning
        self._legacy = legacy
        s = dict(_STATE_DEFAULTS) | (state or {})
        self._mode: str = s["mode"]
        self._held: str = s["held"]
        self._slot_started: bool = s["slot_started"]
        self._n_calls: int = s["n_calls"]
        self._name = TextBuffer(s["name"])
        self._args = TextBuffer(s["args"])
        self._header_index: int | None = s["header_index"]
        self._wrappers: dict[str, str] = dict(s["wrappers"])
        self._ws: str = s["ws"]
        self._nonws: bool = s["nonws"]
        self._diverged: bool = s["diverged"]
        self._resolved: bool = s["resolved"]
        self._raw_tail = TextBuffer(s["raw_tail"])
        self._c_tail = TextBuffer(s["c_tail"])

    def to_state(self) -> dict[str, Any]:
        return {
            "mode": self._mode,
            "held": self._held,
            "slot_started": self._slot_started,
            "n_calls": self._n_calls,
            "name": self._name.value(),
            "args": self._args.value(),
            "header_index": self._header_index,
            "wrappers": dict(self._wrappers),
            "ws": self._ws,
            "nonws": self._nonws,
            "diverged": self._diverged,
            "resolved": self._resolved,
            "raw_tail": self._raw_tail.value(),
            "c_tail": self._c_tail.value(),
        }

    # ── feeding ──────────────────────────────────────────────────────

    def feed(self, text: str) -> ParsedDelta:
        out = DeltaBuilder()
        tokens, self._held = self._lexer.scan(self._held, text)
        for name, tok_text in tokens:
            self._step(name, tok_text, out)
        return out.build()

    def finish(self, input_is_none: bool) -> tuple[ParsedDelta, bool]:
        """Flush; also returns whether empty content means None (not "")."""
        out = DeltaBuilder()
        tokens, self._held = self._lexer.scan(self._held, "", final=True)
        for name, tok_text in tokens:
            self._step(name, tok_text, out)
        if self._mode in (_NAME, _ARGS):
            self._end_slot(out)
        self._mode = _BETWEEN
        if self._legacy and not self._resolved:
            # No accepted call: vLLM returns the raw content unchanged.
            out.content(self._ws + self._raw_tail.value())
            self._ws = ""
            self._raw_tail.clear()
            self._c_tail.clear()
            return out.build(), input_is_none
        if not self._slot_started:
            out.content(self._ws)
        self._ws = ""
        return out.build(), True

    def _step(self, tok: str | None, text: str, out: DeltaBuilder) -> None:
        mode = self._mode
        if mode == _CONTENT:
            self._step_content(tok, text, out)
            return
        self._gate(text, "", identity=False, out=out)
        if tok == g.DROP:
            return
        if mode == _REASONING:
            if tok == g.THINK_END:
                self._mode = _CONTENT
            elif tok == g.TOOL_START:
                self._mode = _PREAMBLE
        elif mode == _NAME:
            if tok == g.INVOKE_NAME_END:
                self._mode = _ARGS
                self._maybe_emit_header(out)
            else:
                self._name.append(text)
        elif mode == _ARGS:
            if tok in (g.INVOKE_END, g.TOOL_END):
                self._end_slot(out)
                self._mode = _BETWEEN
            else:
                self._args.append(text)
        elif tok == g.INVOKE_PREFIX:  # preamble or between
            self._start_slot()
        elif tok == g.TOOL_START and mode == _BETWEEN:
            self._mode = _PREAMBLE

    def _step_content(self, tok: str | None, text: str, out: DeltaBuilder) -> None:
        structural = tok in (g.DROP, g.TOOL_START, g.INVOKE_PREFIX) or (
            tok in (g.THINK_START, g.THINK_END) and not self._skip_reasoning
        )
        if not structural:
            self._gate(text, text, identity=True, out=out)
            return
        self._gate(text, "", identity=False, out=out)
        if tok == g.THINK_START:
            self._mode = _REASONING
        elif tok == g.TOOL_START:
            self._mode = _PREAMBLE
        elif tok == g.INVOKE_PREFIX:
            self._start_slot()
        # DROP text and a stray </think> simply vanish.

    # ── tool slots ───────────────────────────────────────────────────

    def _start_slot(self) -> None:
        self._mode = _NAME
        self._name.clear()
        self._args.clear()
        self._header_index = None
        if self._suppress:
            return
        self._slot_started = True
        if not self._legacy and not self._nonws:
            self._ws = ""  # whitespace-only content before a call is None

    def _maybe_emit_header(self, out: DeltaBuilder) -> None:
        name = self._name.value().strip()
        if self._suppress or not name:
            return  # a nameless invoke is only decided at its end
        self._header_index = self._accept(out)
        out.tool_calls.append(
            ToolCallDelta(self._header_index, id=make_tool_call_id(), name=name)
        )

    def _end_slot(self, out: DeltaBuilder) -> None:
        if self._suppress:
            return
        name, args = self._final_call()
        self._name.clear()
        self._args.clear()
        if not (isinstance(name, str) and name):
            return
        args = fix_arg_types(args, name, self._tools)
        if self._header_index is not None:
            out.tool_calls.append(ToolCallDelta(self._header_index, arguments=args))
        else:
            index = self._accept(out)
            out.tool_calls.append(
                ToolCallDelta(index, id=make_tool_call_id(), name=name, arguments=args)
            )
        self._header_index = None

    def _final_call(self) -> tuple[Any, str]:
        """``_build_extracted_result`` for one finished invoke."""
        raw_name, raw_args = self._name.value(), self._args.value()
        # The engine adopts a "name": "..." found in the args of a nameless
        # invoke; the leftmost match wins however the args were chunked.
        slot_name = raw_name or name_from_args(raw_args)
        if not slot_name and not raw_args:
            return "", ""
        params = parse_params(raw_args) if raw_args.strip() else {}
        owner = self._wrapper_owner(raw_args, params, slot_name)
        name = slot_name.strip()
        if not name and raw_args.strip():
            return name_and_args_from_json(raw_args)
        if not raw_args.strip():
            return name, "{}"
        args = json.dumps(params, ensure_ascii=False)
        if self._tools:
            args = unwrap_wrapper_args(args, self._tools, owner)
        return name, args

    def _wrapper_owner(self, raw_args: str, params: dict[str, Any], slot_name: str) -> str:
        """Function name vLLM uses to unwrap these args: that of the first
        invoke with identical raw args (``DeepSeekV4Parser._convert_args``).
        Only wrapper-shaped args can be unwrapped, so only those are kept."""
        if not is_wrapper_shaped(params):
            return slot_name
        digest = hashlib.sha256(raw_args.encode("utf-8", "surrogatepass")).hexdigest()
        return self._wrappers.setdefault(digest, slot_name)

    def _accept(self, out: DeltaBuilder) -> int:
        """Number the next accepted call; the first one decides the content."""
        if self._legacy and not self._resolved:
            self._resolved = True
            tail = self._ws + self._c_tail.value()
            self._ws = ""
            self._raw_tail.clear()
            self._c_tail.clear()
            if self._nonws or tail.strip():
                self._nonws = True
                out.content(tail)
        index = self._n_calls
        self._n_calls += 1
        return index

    # ── content gate ─────────────────────────────────────────────────

    def _gate(self, raw: str, c: str, *, identity: bool, out: DeltaBuilder) -> None:
        """Route one token's raw text and engine-content text."""
        if self._legacy and not self._resolved and (self._diverged or not identity):
            self._diverged = True
            self._raw_tail.append(raw)
            self._c_tail.append(c)
            return
        if not c:
            return
        if self._nonws:
            out.content(c)
            return
        self._ws += c
        if self._ws.strip():
            self._nonws = True
            out.content(self._ws)
            self._ws = ""
