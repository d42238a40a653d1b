"""Tokenizers built in the test session with the `tokenizers` library.

`build_metaspace_byte_fallback` makes a SentencePiece-style (Llama-2 layout)
BPE: Metaspace pre-tokenizer, `<0xNN>` byte-fallback tokens, and a decoder
that maps the marker to a space, fuses bytes and strips one leading space.
Trained on a small mixed corpus so common words are single tokens while CJK
and emoji mostly fall back to bytes, the hard case for incremental decoding.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

CORPUS = [
    "The quick brown fox jumps over the lazy dog. " * 3,
    "def main(argv):\n    return sum(int(x) for x in argv) # comment\n",
    "Größe naïve café résumé façade Ærøskøbing",
    "東京 大阪 京都 日本語 中文 汉字 한국어 こんにちは",
    "numbers 3.14159 2026-12-02 1,000,000 and symbols <tag> {json: [1, 2]}",
]
_BYTES = [f"<0x{b:02X}>" for b in range(256)]
SPECIALS = ["<unk>", "<s>", "</s>"]
ADDED = ["<think>", "</think>", "<tool_call>", "</tool_call>"]


def build_metaspace_byte_fallback(folder: Path, decoder: str = "llama") -> Path:
    """Write tokenizer.json (+ tokenizer_config.json) into `folder`; return it.

    decoder "llama": Sequence[Replace, ByteFallback, Fuse, Strip];
    decoder "metaspace": Sequence[ByteFallback, Metaspace].
    """
    base = Tokenizer(models.BPE(unk_token="<unk>"))
    base.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    trainer = trainers.BpeTrainer(
        vocab_size=600, special_tokens=SPECIALS + _BYTES, show_progress=False, limit_alphabet=60
    )
    base.train_from_iterator(CORPUS * 20, trainer)
    spec = json.loads(base.to_str())
    spec["model"]["byte_fallback"] = True
    # The trainer registers the byte tokens as special added tokens; in a
    # SentencePiece model they are ordinary vocabulary entries.
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] not in _BYTES]
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    if decoder == "llama":
        tok.decoder = decoders.Sequence(
            [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
        )
    else:
        tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace("▁", "first")])
    tok.add_special_tokens([AddedToken(t, special=True) for t in SPECIALS])
    tok.add_tokens([AddedToken(t, special=False) for t in ADDED])
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    config = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "clean_up_tokenization_spaces": False}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder
