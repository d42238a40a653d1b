"""Per-vocabulary tables, built once when a model loads.

Every per-token question derender asks (which bytes, which logprob string, is it
special) becomes a list lookup here, so request handling never calls into the
tokenizer once per token.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import msgspec
from tokenizers import Tokenizer

from .utf8 import utf8_walk

_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
# transformers' special-token attributes; `all_special_ids` is built from these.
_SPECIAL_ATTRS = (
    "bos_token", "eos_token", "unk_token", "sep_token",
    "pad_token", "cls_token", "mask_token",
)
_EXTRA_SPECIAL_KEYS = ("additional_special_tokens", "extra_special_tokens")


def gpt2_char_to_byte() -> dict[str, int]:
    """The GPT-2 byte-to-unicode map, inverted (what ByteLevel decodes with)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]  # mapped, in order, to chr(256), chr(257), ...
    return {chr(b): b for b in printable} | {chr(256 + n): b for n, b in enumerate(others)}


@dataclass(frozen=True, eq=False)
class Vocab:
    """Immutable tables for one tokenizer; shared by every request thread."""

    tokenizer: Tokenizer
    size: int
    pieces: list[str]
    """Raw vocabulary piece per id ("" for holes in the id space)."""
    raw_bytes: list[bytes]
    """The bytes each token contributes to decoded text (OpenAI's `bytes`)."""
    single_text: list[str]
    """`decode([id])` per id, with vLLM's leading-space repair applied."""
    special_ids: frozenset[int]
    """Ids dropped by `skip_special_tokens` (transformers' `all_special_ids`)."""
    byte_level: bool
    """Decoder is plain ByteLevel: text == lossy UTF-8 of the joined bytes."""
    space_marker: str | None
    """Metaspace replacement char ("▁") when the pre-tokenizer is Metaspace."""
    clean_up_spaces: bool
    eos_token_id: int | None
    token_to_id: dict[str, int]
    sha256: str
    response_template: dict[str, Any] | None = None
    """`tokenizer_config.json`'s `response_template` (the hf/beam parsers read it)."""

    @cached_property
    def partial_ids(self) -> frozenset[int]:
        """Ids whose own decode ends in U+FFFD (a piece of a split character)."""
        return frozenset(i for i, t in enumerate(self.single_text) if t.endswith("\ufffd"))

    @cached_property
    def byte_json(self) -> list[msgspec.Raw]:
        """`raw_bytes` pre-encoded as JSON int arrays: responses embed them as is."""
        encode = msgspec.json.encode
        return [msgspec.Raw(encode(list(b))) for b in self.raw_bytes]

    @cached_property
    def utf8_shape(self) -> list[tuple[bool, int, int]]:
        """Per id `(starts with a continuation byte, characters it starts,
        the sequence it leaves open)` as read after a complete character
        (`utf8_walk`): what `walk_offsets` needs to follow characters across
        tokens. A token starting with a continuation byte may join the
        character before it, so it is walked byte by byte instead."""
        return [(bool(b) and 0x80 <= b[0] <= 0xBF, *utf8_walk(0, b)) for b in self.raw_bytes]

    @cached_property
    def whole_text(self) -> list[str | None]:
        """Per id its text when its bytes are complete, non-empty UTF-8 without
        U+FFFD (a "whole" token: any run of them decodes to their texts joined,
        on character boundaries), else None. ByteLevel vocabularies only
        (empty otherwise): `Detokenizer.feed`'s one-id fast path reads it."""
        if not self.byte_level:
            return []
        out: list[str | None] = []
        for raw, single in zip(self.raw_bytes, self.single_text, strict=False):
            text = raw.decode("utf-8", "replace")  # bytes that are not UTF-8 give a U+FFFD: not whole
            ok = text and "\ufffd" not in text
            out.append(None if not ok else single if single == text else text)  # share the string where equal
        return out

    @cached_property
    def strips_first_space(self) -> bool:
        """The decoder drops the text's leading space (SentencePiece-style:
        Strip or Metaspace's prepend "first"), seen on a token that has one."""
        for tid, raw in enumerate(self.raw_bytes):
            if len(raw) > 1 and raw[:1] == b" " and raw[1:2] != b" " and tid not in self.special_ids:
                return self.tokenizer.decode([tid], skip_special_tokens=False).encode() == raw[1:]
        return False

    def logprob_pairs(self, form: str) -> list[tuple[str | None, msgspec.Raw]]:
        """Per id `(spelling, pre-encoded bytes)` for one token form; the
        spelling is None where vLLM's form re-spells the token in context."""
        cache: dict[str, list[tuple[str | None, msgspec.Raw]]] = self.__dict__.setdefault("_pairs", {})
        pairs = cache.get(form)
        if pairs is None:
            if form == "vllm":
                partial = self.partial_ids
                texts: Sequence[str | None] = [None if i in partial else t for i, t in enumerate(self.single_text)]
            elif form == "openai":  # OpenAI's spelling: the raw bytes, `\xNN` where not valid UTF-8
                texts = [b.decode("utf-8", "backslashreplace") for b in self.raw_bytes]
            else:
                texts = [f"token_id:{i}" for i in range(self.size)]
            byte_json = [_NULL] * self.size if form == "placeholder" else self.byte_json
            pairs = cache[form] = list(zip(texts, byte_json, strict=False))
        return pairs

    def warm(self) -> None:
        """Build the lazy tables now, at load, instead of on a first request."""
        for name in ("partial_ids", "byte_json", "utf8_shape", "whole_text", "strips_first_space"):
            getattr(self, name)
        self.logprob_pairs("vllm")

    def decode(self, ids: list[int]) -> str:
        """What `tokenizer.decode(ids)` gives (special tokens kept)."""
        if self.byte_level:
            return b"".join([self.raw_bytes[i] for i in ids]).decode("utf-8", "replace")
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        return _clean_up_tokenization(text) if self.clean_up_spaces else text


_NULL = msgspec.Raw(b"null")


def load_vocab(tokenizer_path: Path) -> Vocab:
    """Load `tokenizer.json` (or a folder holding it and `tokenizer_config.json`)."""
    folder, file = _locate(tokenizer_path)
    raw = file.read_bytes()
    tokenizer = Tokenizer.from_str(raw.decode("utf-8"))
    spec = json.loads(raw)
    config = _read_json(folder / "tokenizer_config.json") if folder else {}
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    pieces = [tokenizer.id_to_token(i) or "" for i in range(size)]
    decoder_steps = [d["type"] for d in _decoders(spec.get("decoder"))]
    raw_bytes = _token_bytes(pieces, decoder_steps, spec.get("decoder"), tokenizer)
    space_marker = _metaspace_marker(spec.get("pre_tokenizer"))
    clean_up = bool(config.get("clean_up_tokenization_spaces")) and spec["model"]["type"] != "BPE"
    return Vocab(
        tokenizer=tokenizer,
        size=size,
        pieces=pieces,
        raw_bytes=raw_bytes,
        single_text=_single_token_texts(tokenizer, size, pieces, space_marker, clean_up),
        special_ids=_special_ids(tokenizer, spec, config),
        byte_level=decoder_steps == ["ByteLevel"],
        space_marker=space_marker,
        clean_up_spaces=clean_up,
        eos_token_id=_token_id(tokenizer, config.get("eos_token")),
        token_to_id=tokenizer.get_vocab(with_added_tokens=True),
        sha256=hashlib.sha256(raw).hexdigest(),
        response_template=template if isinstance(template := config.get("response_template"), dict) else None,
    )


def _locate(path: Path) -> tuple[Path | None, Path]:
    if path.is_dir():
        return path, path / "tokenizer.json"
    # A bare tokenizer.json may still sit beside its config.
    return (path.parent if (path.parent / "tokenizer_config.json").exists() else None), path


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text("utf-8")) if path.exists() else {}


def _decoders(decoder: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The decoder's steps (a Sequence's members, else the decoder itself)."""
    if decoder is None:
        return []
    return decoder["decoders"] if decoder["type"] == "Sequence" else [decoder]


def _token_bytes(
    pieces: list[str], steps: list[str], decoder: dict[str, Any] | None, tokenizer: Tokenizer
) -> list[bytes]:
    """Raw bytes per token, derived from how the decoder maps a piece to text.

    ByteLevel maps each char back to one byte (a piece with an unmapped char,
    such as an added token, passes through as UTF-8, as the decoder does);
    ByteFallback turns `<0xNN>` into that byte; Metaspace/Replace turn the
    marker into a space. Unknown decoders fall back to the decoded text.
    """
    if "ByteLevel" in steps:
        table = gpt2_char_to_byte()
        return [_byte_level_bytes(p, table) for p in pieces]
    replacements = _replacements(decoder)
    if replacements is None:
        texts = tokenizer.decode_batch([[i] for i in range(len(pieces))], skip_special_tokens=False)
        return [t.encode("utf-8") for t in texts]
    out = []
    for piece in pieces:
        m = _BYTE_FALLBACK.match(piece) if "ByteFallback" in steps else None
        if m:
            out.append(bytes([int(m.group(1), 16)]))
            continue
        for old, new in replacements:
            piece = piece.replace(old, new)
        out.append(piece.encode("utf-8"))
    return out


def _byte_level_bytes(piece: str, table: dict[str, int]) -> bytes:
    try:
        return bytes([table[c] for c in piece])
    except KeyError:
        return piece.encode("utf-8")


def _replacements(decoder: dict[str, Any] | None) -> list[tuple[str, str]] | None:
    """String replacements a Metaspace/Replace decoder applies, or None if the
    decoder has a step we cannot express as per-token bytes."""
    out: list[tuple[str, str]] = []
    for step in _decoders(decoder):
        kind = step["type"]
        if kind == "Replace" and "String" in step["pattern"]:
            out.append((step["pattern"]["String"], step["content"]))
        elif kind == "Metaspace":
            out.append((step.get("replacement", "▁"), " "))
        elif kind not in ("ByteFallback", "Fuse", "Strip"):
            return None
    return out


def _metaspace_marker(pre: dict[str, Any] | None) -> str | None:
    """vLLM's `get_leading_space_marker`: only Metaspace pre-tokenizers."""
    if not pre:
        return None
    for sub in pre.get("pretokenizers", []) if pre["type"] == "Sequence" else [pre]:
        if sub.get("type") == "Metaspace":
            return str(sub.get("replacement", "▁"))
    return None


def _single_token_texts(
    tokenizer: Tokenizer, size: int, pieces: list[str], marker: str | None, clean_up: bool
) -> list[str]:
    """vLLM's per-candidate logprob string (`convert_ids_list_to_tokens`),
    computed for the whole vocabulary at once; decode_batch releases the GIL."""
    texts = tokenizer.decode_batch([[i] for i in range(size)], skip_special_tokens=False)
    if clean_up:
        texts = [_clean_up_tokenization(t) for t in texts]
    if marker is None:
        return texts
    return [_restore_leading_spaces(p, t, marker) for p, t in zip(pieces, texts, strict=False)]


def _restore_leading_spaces(piece: str, text: str, marker: str) -> str:
    markers = len(piece) - len(piece.lstrip(marker))
    missing = markers - (len(text) - len(text.lstrip(" ")))
    return " " * missing + text if missing > 0 else text


def _clean_up_tokenization(text: str) -> str:
    """transformers' `clean_up_tokenization` (only used where configured)."""
    for old, new in (
        (" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
        (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"),
    ):
        text = text.replace(old, new)
    return text


def _token_id(tokenizer: Tokenizer, token: str | dict[str, Any] | None) -> int | None:
    if isinstance(token, dict):
        token = token.get("content")
    return tokenizer.token_to_id(token) if token else None


def _special_ids(tokenizer: Tokenizer, spec: dict[str, Any], config: dict[str, Any]) -> frozenset[int]:
    """The ids `skip_special_tokens` drops.

    With a `tokenizer_config.json` this is transformers' `all_special_ids`
    (what vLLM skips); a bare `tokenizer.json` has no such config, so the
    added tokens it flags `special` are used, as `tokenizers.decode` does.
    """
    if not config:
        return frozenset(t["id"] for t in spec.get("added_tokens", []) if t.get("special"))
    tokens: list[str | dict[str, Any] | None] = [config.get(attr) for attr in _SPECIAL_ATTRS]
    for key in _EXTRA_SPECIAL_KEYS:
        extra = config.get(key) or []
        tokens.extend(extra.values() if isinstance(extra, dict) else extra)
    ids = (_token_id(tokenizer, t) for t in tokens)
    return frozenset(i for i in ids if i is not None)
