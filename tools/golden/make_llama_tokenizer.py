"""Train the Llama-style tokenizer the `llama` golden family uses, once, and
store it as `tests/golden/llama/tokenizer.json.gz` (+ `tokenizer_config.json`).

    python tools/golden/make_llama_tokenizer.py [--out DIR]

Llama 2 / Mistral layout: SentencePiece-style BPE with byte fallback
(`<unk>`=0, `<s>`=1, `</s>`=2, `<0x00>`..`<0xFF>`=3..258), a Metaspace
pre-tokenizer (prepend "first", no split, as transformers' LlamaConverter
writes it) and the real decoder chain Replace("▁"→" "), ByteFallback, Fuse,
Strip(1 leading space). 32000 ids from the trainer plus added tokens:
`[INST]`, `[/INST]` (special, named in the config like Mistral's control
tokens) and `<think>`, `</think>`, `<tool_call>`, `</tool_call>` (not special).

The corpus is built here, deterministically: this interpreter's standard
library sources (sorted, code and English docstrings) plus text drawn with a
fixed seed from Latin, Cyrillic, Greek, CJK, Hangul, kana, Arabic, Hebrew,
Devanagari and emoji, words Zipf-distributed so common ones merge and rare
characters fall back to bytes. Only the stdlib and `tokenizers` are imported.
Training takes about a minute on 2 cores, so tests read the stored file.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import sysconfig
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

SEED = "derender-queue llama fixture v1"
VOCAB = 32000
SPECIALS = ["<unk>", "<s>", "</s>"]
BYTES = [f"<0x{b:02X}>" for b in range(256)]
ADDED_SPECIAL = ["[INST]", "[/INST]"]
ADDED = ["<think>", "</think>", "<tool_call>", "</tool_call>"]
SCRIPTS = {
    "latin": [chr(c) for c in range(ord("a"), ord("z") + 1)] + list("éèàçñöüßøåæœ"),
    "cyrillic": [chr(c) for c in range(0x430, 0x450)],
    "greek": [chr(c) for c in range(0x3B1, 0x3CA)],
    "cjk": [chr(c) for c in range(0x4E00, 0x4E00 + 2500)],
    "hangul": [chr(c) for c in range(0xAC00, 0xAC00 + 600)],
    "kana": [chr(c) for c in range(0x3041, 0x3097)] + [chr(c) for c in range(0x30A1, 0x30FB)],
    "arabic": [chr(c) for c in range(0x627, 0x64B)],
    "hebrew": [chr(c) for c in range(0x5D0, 0x5EB)],
    "devanagari": [chr(c) for c in range(0x915, 0x93A)] + [chr(c) for c in range(0x93E, 0x94D)],
}
EMOJI = [chr(c) for c in range(0x1F600, 0x1F650)] + ["👍🏽", "👨‍👩‍👧", "🇯🇵", "🏳️‍🌈", "1️⃣", "❤️"]


def stdlib_corpus(limit: int = 9_000_000) -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    out, total = [], 0
    for path in sorted(root.rglob("*.py")):
        if "test" in path.parts or "site-packages" in path.parts:
            continue
        try:
            text = path.read_text("utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        out.append(text)
        total += len(text)
        if total >= limit:
            break
    return out


def script_corpus() -> list[str]:
    rng = random.Random(SEED)
    lines = []
    for name, alphabet in SCRIPTS.items():
        spaced = name not in ("cjk", "kana")
        # a Zipf-ish lexicon per script
        lexicon = ["".join(rng.choice(alphabet[: max(8, len(alphabet) * (i % 7 + 1) // 7)])
                           for _ in range(rng.randint(1, 3 if not spaced else 8)))
                   for i in range(3000)]
        weights = [1 / (i + 1) for i in range(len(lexicon))]
        for _ in range(4000):
            words = rng.choices(lexicon, weights, k=rng.randint(3, 20))
            if rng.random() < 0.1:
                words.insert(rng.randrange(len(words)), rng.choice(EMOJI))
            lines.append((" " if spaced else "").join(words) + rng.choice([".", "。", "!", "?", ",", ""]))
    return lines


def build() -> Tokenizer:
    base = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    # Training splits on the marker (SentencePiece never merges across words).
    base.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=SPECIALS + BYTES, show_progress=False, limit_alphabet=1200,
    )
    base.train_from_iterator(stdlib_corpus() + script_corpus(), trainer)
    spec = json.loads(base.to_str())
    spec["model"]["byte_fallback"] = True
    # The trainer registers the byte pieces as added tokens; in a
    # SentencePiece model they are ordinary vocabulary entries.
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] not in BYTES]
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    tok.add_special_tokens([AddedToken(t, special=True) for t in SPECIALS + ADDED_SPECIAL])
    tok.add_tokens([AddedToken(t, special=False) for t in ADDED])
    return tok


CONFIG = {
    "tokenizer_class": "PreTrainedTokenizerFast",
    "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
    "additional_special_tokens": ADDED_SPECIAL,
    "clean_up_tokenization_spaces": False,
    "add_bos_token": True, "add_eos_token": False,
    "model_max_length": 4096,
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[2] / "tests" / "golden" / "llama")
    args = ap.parse_args()
    tok = build()
    text = tok.to_str()
    args.out.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(args.out / "tokenizer.json.gz", "wb", mtime=0) as f:
        f.write(text.encode())
    (args.out / "tokenizer_config.json").write_text(json.dumps(CONFIG, indent=2) + "\n")
    print(tok.get_vocab_size(with_added_tokens=True), "ids; sha256", hashlib.sha256(text.encode()).hexdigest())


if __name__ == "__main__":
    main()
