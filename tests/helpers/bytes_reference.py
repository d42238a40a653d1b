"""An independent reference for OpenAI's logprob `bytes`: every id's raw bytes
derived from the tokenizer's own data, sharing nothing with the code under
test (it imports only the stdlib and `tokenizers`).

- ByteLevel vocabularies (GPT-2 / DeepSeek): each character of the vocabulary
  string is one byte under the GPT-2 byte-to-unicode map.
- Metaspace / SentencePiece vocabularies (Llama 2, Mistral, Gemma): a
  `<0xNN>` byte-fallback piece is the byte NN; otherwise the piece's UTF-8
  with `▁` read as a space.
- Added and special tokens: the UTF-8 of their content.
- Ids outside the id space: no bytes.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from tokenizers import Tokenizer

_FALLBACK = re.compile(r"<0x([0-9A-F]{2})>")


def gpt2_unicode_to_byte() -> dict[str, int]:
    """GPT-2's `bytes_to_unicode`, inverted: printable bytes map to the
    character of the same code point, the other 68 to 256, 257, ... in order."""
    keep = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    out, extra = {}, 256
    for b in range(256):
        if b in keep:
            out[chr(b)] = b
        else:
            out[chr(extra)] = b
            extra += 1
    return out


def read_tokenizer_json(path: Path) -> str:
    data = path.read_bytes()
    return gzip.decompress(data).decode() if path.suffix == ".gz" else data.decode()


def _decoder_types(decoder: dict | None) -> list[str]:
    if not decoder:
        return []
    if decoder["type"] == "Sequence":
        return [d["type"] for d in decoder["decoders"]]
    return [decoder["type"]]


def reference_bytes(tokenizer_json: str) -> list[bytes]:
    """Bytes per id for the tokenizer serialised in `tokenizer_json`."""
    spec = json.loads(tokenizer_json)
    tok = Tokenizer.from_str(tokenizer_json)
    size = tok.get_vocab_size(with_added_tokens=True)
    added = {i: t.content for i, t in tok.get_added_tokens_decoder().items()}
    byte_level = "ByteLevel" in _decoder_types(spec.get("decoder"))
    byte_fallback = bool(spec["model"].get("byte_fallback"))
    table = gpt2_unicode_to_byte()
    by_id = {i: piece for piece, i in spec["model"]["vocab"].items()}
    out: list[bytes] = []
    for i in range(size):
        if i in added:
            out.append(added[i].encode())
            continue
        piece = by_id.get(i)
        if piece is None:
            out.append(b"")
        elif byte_level:
            out.append(bytes(table[c] for c in piece))
        elif byte_fallback and _FALLBACK.fullmatch(piece):
            out.append(bytes([int(piece[3:5], 16)]))
        else:
            out.append(piece.replace("\u2581", " ").encode())
    return out
