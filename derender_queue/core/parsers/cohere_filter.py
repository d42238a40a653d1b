"""cohere_melody 0.15.3's Rust filter for Command 3 and 4 (``PyFilter``,
``process_full_text``), written here: markers switch modes, each block's text
is trimmed, inline citations are cut out, and a JSON action scanner reads the
calls (``src/parsing/filter.rs``, ``citations_filter.rs``, ``action_filter.rs``).
``cohere.py`` streams it as vLLM's ``CohereCommandParser``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .deltas import ParsedDelta, ToolCallDelta

CMD3, CMD4 = "cohere_command3", "cohere_command4"
NAMES = (CMD3, CMD4)

# Modes (melody's FilterMode, the ones the two presets reach).
ANSWER, REASON, ACTION, IGNORE = "answer", "reason", "action", "ignore"
_COMMON = {"<|START_THINKING|>": REASON, "<|END_THINKING|>": ANSWER, "<|START_ACTION|>": ACTION,
           "<|END_ACTION|>": IGNORE}  # fmt: skip
MARKERS = {
    CMD3: {"<|START_RESPONSE|>": ANSWER, "<|END_RESPONSE|>": IGNORE, **_COMMON},
    CMD4: {"<|START_TEXT|>": ANSWER, "<|END_TEXT|>": IGNORE, "<|START_RESPONSE|>": ANSWER,
           "<|END_RESPONSE|>": IGNORE, **_COMMON},
}  # fmt: skip
START_MODE = {CMD3: ANSWER, CMD4: REASON}

# Rust's char::is_whitespace and regex \s (Unicode White_Space).
WS = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
_S = "[" + re.escape(WS) + "]"
_CALL_ID = re.compile(rf'"tool_call(_id)?":{_S}*"')
_TOOL_NAME = re.compile(rf'"tool_name":{_S}*"')
_PARAMS_OBJECT = re.compile(rf'"parameters":{_S}*\{{{_S}*"')
_PARAMS = re.compile(rf'"parameters":{_S}*')
_INDENT = 8  # NUM_SPACE_TO_REMOVE_PER_LINE
_CO_OPEN, _CO_CLOSE = b"<co>", b"</co: "


def find_marker(text: str, markers: dict[str, str]) -> tuple[int, str] | None:
    """The earliest whole marker (``find_partial``'s Full)."""
    best: tuple[int, str] | None = None
    for marker in markers:
        i = text.find(marker)
        if i >= 0 and (best is None or i < best[0]):
            best = (i, marker)
    return best


def _partial_at(data: bytes, marker: bytes) -> int:
    """Where ``data`` ends with a proper prefix of ``marker``, or -1."""
    for k in range(len(marker) - 1, 0, -1):
        if data.endswith(marker[:k]):
            return len(data) - k
    return -1


def _ends_with_partial(text: str, markers: dict[str, str]) -> bool:
    return any(_partial_at(text.encode(), m.encode()) >= 0 for m in markers)


def _lossy(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _valid_json(text: str) -> bool:
    """serde_json's ``from_str::<Value>``: one JSON value, blanks around."""
    try:
        json.loads(text, parse_constant=_refuse)
    except (ValueError, RecursionError):
        return False
    return not _LONE_SURROGATE.search(text)


def _refuse(_: str) -> None:
    raise ValueError("not JSON")


_LONE_SURROGATE = re.compile(r"(?<!\\)(?:\\\\)*\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])")
_VALUE_END = frozenset('}]"0123456789el')


class MelodyFilter:
    """melody's ``FilterImpl`` with the cmd3/cmd4 options, fed the pieces
    ``process_full_text`` cuts.  ``write`` returns (reasoning, content, call
    events); a call event is (index, id, name, arguments text)."""

    def __init__(self, preset: str, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self.markers = MARKERS[preset]
        self.mode: str = s.get("m", START_MODE[preset])
        self.left_trim: bool = s.get("lt", False)
        self.cit: int | None = s.get("ci")  # cur_citation_byte_index
        self.act: str = s.get("am", "start")  # ActionMode
        self.call: int = s.get("ai", 0)
        self.buffer: str = s.get("ab", "")  # param_value_buffer
        self.indent: int = s.get("ir", 0)  # raw_param_indent_length_removed
        self.line_text: bool = s.get("ln", False)  # saw_non_whitespace_in_current_line
        self.buf: str = s.get("b", "")

    def to_state(self) -> dict[str, Any]:
        return {"m": self.mode, "lt": self.left_trim, "ci": self.cit, "am": self.act, "ai": self.call,
                "ab": self.buffer, "ir": self.indent, "ln": self.line_text, "b": self.buf}  # fmt: skip

    # ── FilterImpl.write_text / process_full_text ────────────────────

    def write(self, text: str, out: ParsedDelta) -> None:
        self.buf += text
        while True:
            found = find_marker(self.buf, self.markers)
            if found is None:
                if _ends_with_partial(self.buf, self.markers):
                    return
                break
            idx, marker = found
            if idx:
                self._handle(self.buf[:idx], True, out)
            if self.markers[marker] == REASON:
                self.left_trim = True
            if self.markers[marker] in (ANSWER, REASON):
                self.cit = None
            self.buf = self.buf[idx + len(marker):]
            self.mode = self.markers[marker]
        if self.buf:
            removed = self._handle(self.buf, False, out)
            self.buf = self.buf[removed:]

    def finish(self, out: ParsedDelta) -> None:
        if self.buf:
            text, self.buf = self.buf, ""
            self._handle(text, True, out)

    def _handle(self, text: str, last: bool, out: ParsedDelta) -> int:
        if self.mode == ACTION:
            return self._actions(text, out)
        if self.mode in (ANSWER, REASON):
            return self._grounded(text, last, out)
        return 0

    # ── citations_filter.rs (text only: vLLM's answer has no citations) ──

    def _trim(self, data: bytes) -> tuple[bytes, int]:
        s = data.decode("utf-8", "replace")  # the pieces are whole characters
        kept = s.rstrip(WS)
        rem = len(data) - len(kept.encode())
        if self.left_trim:
            kept = kept.lstrip(WS)
            if kept:
                self.left_trim = False
        return kept.encode(), rem

    def _grounded(self, text: str, last: bool, out: ParsedDelta) -> int:
        data = text.encode()
        send, rem_right = self._trim(data)
        remove = len(data) - len(send) - rem_right
        result, remove_cit, cited = self._citations(send)
        if result is None or (not result and not cited):
            if not send or not last:
                return _chars(data, remove + remove_cit)
            idx, self.cit = self.cit, None
            unsent = send if idx is None else send[idx:] if idx < len(send) else b""
            if not unsent:
                return _chars(data, remove + remove_cit)
            result = unsent
        if result and self.mode == REASON:
            out.reasoning = (out.reasoning or "") + _lossy(result)
        elif result:
            out.content = (out.content or "") + _lossy(result)
        return _chars(data, remove + remove_cit)

    def _citations(self, s: bytes) -> tuple[bytes | None, int, bool]:
        """``parse_citations``: (text, bytes consumed, a citation found);
        None to wait."""
        if b"<" not in s:
            return s, len(s), False
        first = s.find(_CO_OPEN)
        if first < 0:
            first = _partial_at(s, _CO_OPEN)
            if first < 0:
                return s, len(s), False
            first_end = -1
        else:
            first_end = first + len(_CO_OPEN) - 1
        if first_end < 0:
            return None, 0, False
        last = s.find(_CO_CLOSE)
        last_end = -1
        if last < 0:
            last = _partial_at(s, _CO_CLOSE)
        else:
            j = s.find(b">", last + 1)
            last_end = j
        if last < 0 or last_end < 0:
            if last_end < 0:
                text, remove = self._partial_citation(first, first_end, last, s)
                if text:
                    return text, remove, False
            return None, 0, False
        if first_end > last:
            return None, 0, False
        text = s[:first] + s[first_end + 1:last]
        if self.cit is not None:
            text = s[self.cit:last] if self.cit < last else b""
        self.cit = None
        more, more_rem, _ = self._citations(s[last_end + 1:])
        if more is not None:
            text += more
        return text, last_end + 1 + more_rem, True

    def _partial_citation(self, first: int, first_end: int, last: int, s: bytes) -> tuple[bytes, int]:
        before = s[:first]
        if self.cit is not None:
            if self.cit >= len(s):
                return before, len(before)
            start = self.cit
        else:
            start = first_end + 1
        self.cit = len(s) - len(before)
        end = last if last > 0 else len(s)
        if start >= end:
            return before, len(before)
        return before + s[start:end], len(before)

    # ── action_filter.rs (raw parameters: stream_processed_params off) ──

    def _actions(self, s: str, out: ParsedDelta) -> int:
        if not s or s.endswith("\\"):
            return 0
        if self.act in ("start", "end"):
            return self._before_tool(s, _CALL_ID, "id", out)
        if self.act in ("id", "name"):
            idx = _unescaped_quote(s)
            if idx < 0:
                return 0
            if idx:
                self._event(out, **{self.act: s[:idx]})
            self.act = "id_end" if self.act == "id" else "name_end"
            return idx + 1 + self._actions(s[idx + 1:], out)
        if self.act == "id_end":
            return self._before_tool(s, _TOOL_NAME, "name", out)
        if self.act == "name_end":
            if _PARAMS_OBJECT.search(s):
                self.act = "raw"
                m = _PARAMS.search(s)
                assert m is not None
                return m.end() + self._actions(s[m.end():], out)
            idx = s.find("}")
            if idx < 0:
                return 0
            self._end_call()
            return idx + self._actions(s[idx:], out)
        return self._raw(s, out)

    def _before_tool(self, s: str, regex: re.Pattern[str], mode: str, out: ParsedDelta) -> int:
        m = regex.search(s)
        if m is None:
            return 0
        self.act = mode
        return m.end() + self._actions(s[m.end():], out)

    def _raw(self, s: str, out: ParsedDelta) -> int:
        idx = self._json_end(s)
        if idx < 0:
            self._event(out, args=self._dedent(s))
            self.buffer += s
            return len(s)
        self._event(out, args=self._dedent(s[:idx]))
        self.buffer = ""
        self._end_call()
        return idx + self._actions(s[idx:], out)

    def _end_call(self) -> None:
        self.act = "end"
        self.call += 1

    def _json_end(self, s: str) -> int:
        """``find_valid_json_value``: the end of the shortest prefix that
        completes the held value as JSON, or -1."""
        for i, c in enumerate(s):
            if c in _VALUE_END and _valid_json(self.buffer + s[: i + 1]):
                return i + 1
        return -1

    def _dedent(self, s: str) -> str:
        kept = []
        for c in s:
            if c == "\n":
                self.indent, self.line_text = 0, False
            elif c in WS:
                if self.indent < _INDENT and not self.line_text:
                    self.indent += 1
                    continue
            else:
                self.line_text = True
            kept.append(c)
        return "".join(kept)

    def _event(self, out: ParsedDelta, id: str = "", name: str = "", args: str = "") -> None:
        if id or name or args:
            out.tool_calls.append(ToolCallDelta(self.call, id=id or None, name=name or None, arguments=args or None))


def _chars(data: bytes, nbytes: int) -> int:
    return len(_lossy(data[:nbytes]))


def _unescaped_quote(s: str) -> int:
    i = s.find('"')
    while i >= 0:
        k = i
        while k > 0 and s[k - 1] == "\\":
            k -= 1
        if (i - k) % 2 == 0:
            return i
        i = s.find('"', i + 1)
    return -1
