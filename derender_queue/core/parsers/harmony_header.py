"""A harmony message header, read as openai_harmony 0.0.8 reads it.

vLLM 0.34's ``HarmonyParser`` feeds token ids to openai_harmony's
``StreamableParser``, which decodes a message's header tokens (everything
between ``<|start|>`` and ``<|message|>``, special tokens spelled out) and
parses that string (``parse_header_from_string`` in its ``encoding.rs``):

* the first ``<|channel|>`` is followed by the channel, up to whitespace or
  ``<`` (none: an error);
* the rest, trimmed, with a space put before each ``<|constrain|>``, is split
  on ASCII whitespace: an optional role (required after a ``<|start|>``:
  the parser knows the first message's role only), then
  ``[recipient] [content type]`` read from the end; a part left over is an
  error.

An error drops the message (see ``harmony.py``).  Which messages count, and
how (``message_kind``), is vLLM's ``_SegmentType.from_channel_and_recipient``
with ``is_function_recipient`` from ``harmony_utils.py``.  Rust's ``trim``
and ``char::is_whitespace`` use Unicode's White_Space, which differs from
Python's ``str.isspace`` (U+001C..U+001F), so the sets are spelled here.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

CHANNEL = "<|channel|>"
CONSTRAIN = "<|constrain|>"

# Unicode White_Space (Rust's char::is_whitespace / str::trim).
_WHITE_SPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
                + "\u2028\u2029\u202f\u205f\u3000")
_ASCII_WS = " \t\n\x0c\r"  # str::split_ascii_whitespace (no U+000B)
_ROLES = ("user", "assistant", "system", "developer", "tool")
# harmony_utils.BUILTIN_TOOL_TO_MCP_SERVER_LABEL: built-in tools, not functions.
_BUILTIN_TOOLS = ("python", "browser", "container")


class Kind(Enum):
    """What a completed message contributes to vLLM's answer."""

    TOOL = "tool"
    REASONING = "reasoning"
    CONTENT = "content"
    IGNORE = "ignore"  # another channel, a built-in tool, not the assistant


class Header(NamedTuple):
    role: str
    channel: str | None
    recipient: str | None
    content_type: str | None


def parse_header(header: str, *, role_known: bool) -> Header | None:
    """The header's fields, or None where openai_harmony raises."""
    channel = None
    at = header.find(CHANNEL)
    if at >= 0:
        after = header[at + len(CHANNEL) :]
        end = next((i for i, c in enumerate(after) if c in _WHITE_SPACE or c == "<"), len(after))
        if end == 0:
            return None  # "channel marker present but no channel value"
        channel = after[:end]
        header = header[:at] + after[end:]
    header = header.strip(_WHITE_SPACE)
    if CONSTRAIN in header:
        header = header.replace(CONSTRAIN, " " + CONSTRAIN).strip(_WHITE_SPACE)
    parts = _split_ascii(header)
    role = "assistant" if role_known else _role(parts)
    if role is None:
        return None
    if parts and parts[0] == role:
        parts.pop(0)
    fields = _recipient_and_type(parts)
    if fields is None:
        return None
    return Header(role, channel, *fields)


def _split_ascii(text: str) -> list[str]:
    parts: list[str] = []
    word: list[str] = []
    for c in text:
        if c in _ASCII_WS:
            if word:
                parts.append("".join(word))
                word = []
        else:
            word.append(c)
    if word:
        parts.append("".join(word))
    return parts


def _role(parts: list[str]) -> str | None:
    """The role a header after ``<|start|>`` names (``parts`` loses an
    unknown one), or None for none or an unknown one without a recipient."""
    if not parts:
        return None
    if parts[0] in _ROLES:
        return parts[0]
    if len(parts) > 1 or parts[0].startswith("to="):
        parts.pop(0)
        return "tool"
    return None


def _recipient_and_type(parts: list[str]) -> tuple[str | None, str | None] | None:
    if not parts:
        return None, None
    count, last = len(parts), parts.pop()
    recipient = content_type = None
    if last.startswith("to="):
        recipient = last[3:]
    elif count == 1:
        recipient = last
    else:
        content_type = last
        raw = parts.pop()
        recipient = raw[3:] if raw.startswith("to=") else raw
    if parts:
        return None  # "unexpected tokens remaining in message header"
    return recipient, content_type


def _normalize_recipient(recipient: str | None) -> str | None:
    """``HarmonyParser._normalize_recipient``."""
    if recipient is None:
        return None
    at = recipient.find(CONSTRAIN)
    if at == -1:
        return recipient
    return recipient[:at].rstrip() or None


def is_function_recipient(recipient: str) -> bool:
    """``harmony_utils.is_function_recipient`` on the chat path (bare
    recipients count as functions)."""
    if not recipient or recipient.startswith("<|"):
        return False
    if recipient.startswith("functions."):
        return len(recipient) > len("functions.")
    if recipient == "assistant" or recipient in _BUILTIN_TOOLS:
        return False
    return recipient.split(".", 1)[0] not in _BUILTIN_TOOLS


def message_kind(header: Header) -> tuple[Kind, str | None]:
    """The message's kind, and for a call the function's name."""
    if header.role != "assistant":
        return Kind.IGNORE, None
    recipient = _normalize_recipient(header.recipient)
    if recipient and is_function_recipient(recipient):
        return Kind.TOOL, recipient.removeprefix("functions.")
    if header.channel == "analysis":
        return Kind.REASONING, None
    if header.channel == "final" or (header.channel == "commentary" and recipient is None):
        return Kind.CONTENT, None
    return Kind.IGNORE, None
