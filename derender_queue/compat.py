"""Compatibility profiles: which vLLM release's derender answers a model gives.

Every served model answers as one release's render server does (the models
config's `compat`, else the `DERENDER_COMPAT` setting; `0.34` by default).
This table is the one place where the releases differ: the core reads the
profile of the model it serves (`Model.profile`), never a version number.
What we do differently from both releases on purpose, and per profile, is
docs/compatibility.md.

Parsed streams follow vLLM's non-streaming answer in every release (a
folded stream equals the whole response), so what the releases' own parsed
streams do differently (0.33's deepseek_v4 reasoning stopping at the first
`</think>` without a tool parser, 0.34 sending an open DSML string value
before its parameter closes) has no entry here: docs/compatibility.md says
where our streams differ from each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from msgspec import UNSET, UnsetType

DEFAULT_COMPAT = "0.34"


@dataclass(frozen=True)
class Profile:
    name: str
    release: str
    """The vLLM release whose render server this profile answers as."""
    null_extras: bool
    """`message.annotations` and `usage.prompt_tokens_details` are written as
    null (0.33), or left out (0.34)."""
    prompt_tokens_from_usage: bool
    """An omitted `prompt_tokens` (non-streaming) falls back to the generate
    response's `usage.prompt_tokens` (0.34), else it is 0 (0.33). Streams
    fall back to their usage chunk's count in both."""
    decode_prompt_logprobs: bool
    """`prompt_logprobs` entries with `decoded_token: null` (a `--tokens-only`
    generate server) are decoded, U+FFFD repaired from the preceding prompt
    tokens, and completion choices carry their response's (0.34); 0.33 passes
    chat's through as given and gives completion choices null."""
    placeholder_tokens: Literal["vllm", "ours"]
    """`return_tokens_as_token_ids` (the request's, else the model's
    default): 0.34 spells `token_id:N` with `bytes: null`, and completion
    `text_offset` sums the placeholders' lengths ("vllm"). 0.33 ignores the
    flag; under its profile we honour it our way ("ours": raw bytes,
    character offsets into the text)."""
    empty_tools_mean_none: bool
    """`tools: []` is read as no tools, `auto`/`required` as `none` (0.34);
    0.33 refuses it (400)."""
    named_tool_mismatch: str
    """The 400 for a named `tool_choice` that no tool has (`{name}`)."""
    stream_state_form: Literal["prev_token_ids", "prev_tokens"]
    """How the release spells its plain `stream_state` window: ids (0.34) or
    token strings (0.33). Both are read whatever the profile."""

    @property
    def null_extra(self) -> UnsetType | None:
        """The value of `annotations` / `prompt_tokens_details`: msgspec
        leaves an UNSET field out."""
        return None if self.null_extras else UNSET


PROFILES: dict[str, Profile] = {
    "0.34": Profile(
        name="0.34",
        release="vLLM 0.34.0",
        null_extras=False,
        prompt_tokens_from_usage=True,
        decode_prompt_logprobs=True,
        placeholder_tokens="vllm",
        empty_tools_mean_none=True,
        named_tool_mismatch="The tool `{name}` specified in `tool_choice` does not match any of the specified `tools`",
        stream_state_form="prev_token_ids",
    ),
    "0.33": Profile(
        name="0.33",
        release="vLLM 0.33.0",
        null_extras=True,
        prompt_tokens_from_usage=False,
        decode_prompt_logprobs=False,
        placeholder_tokens="ours",
        empty_tools_mean_none=False,
        named_tool_mismatch="The tool specified in `tool_choice` does not match any of the specified `tools`",
        stream_state_form="prev_tokens",
    ),
}


def profile(name: str) -> Profile:
    """The profile of that name, or a ValueError naming the known ones."""
    found = PROFILES.get(name)
    if found is None:
        raise ValueError(f"unknown compat profile {name!r}: use one of {', '.join(PROFILES)}")
    return found
