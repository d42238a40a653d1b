"""What a parser needs to know about the chat request.

``ParseRequest`` carries the few request fields vLLM 0.33's parsers and
``assemble_chat_message_fields`` read.  ``from_body`` builds one from the
request JSON the way ``ChatCompletionRequest`` defaults and validates those
fields, so callers do not have to re-derive vLLM's rules.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from derender_queue.compat import PROFILES, Profile

ToolChoice = str | dict[str, Any] | None

# vLLM's ChatCompletionRequest defaults tool_choice to "none", except that a
# request with tools and no tool_choice key gets "auto".  A dataclass default
# cannot see which keys were sent, so an explicit marker stands for "absent".
UNSET: Any = type("Unset", (), {"__repr__": lambda self: "UNSET"})()

_CORRECT_USAGE = (
    'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`'
)


class ParserInputError(ValueError):
    """The request is invalid for parsing (vLLM answers HTTP 400).

    ``str(e)`` is vLLM's message; ``parameter`` names the offending field.
    """

    def __init__(self, message: str, *, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter


@dataclass(frozen=True)
class ParseRequest:
    """Request fields the chat parsers depend on.

    ``tools`` are the request's OpenAI function tools (already schema
    validated by the API layer).  ``chat_template_kwargs`` must be the
    *resolved* kwargs vLLM hands the parser (see
    ``resolve_chat_template_kwargs``), not the raw request field.
    ``prompt_token_ids`` is kept for the streaming path; vLLM 0.33's
    non-streaming ``parse()`` ignores it for every parser built here.
    """

    tools: list[dict[str, Any]] | None = None
    tool_choice: ToolChoice = UNSET
    parallel_tool_calls: bool | None = True
    include_reasoning: bool = True
    chat_template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    prompt_token_ids: Sequence[int] | None = None
    # The request's own chat_template_kwargs field as sent: what a vLLM parser
    # reading ``request.chat_template_kwargs`` sees (nemotron_v3's swap).
    sent_chat_template_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.tool_choice is UNSET:
            object.__setattr__(self, "tool_choice", "auto" if self.tools else "none")
        validate_tool_usage(self.tools, self.tool_choice)

    @classmethod
    def from_body(
        cls,
        body: Mapping[str, Any],
        *,
        prompt_token_ids: Sequence[int] | None = None,
        default_chat_template_kwargs: Mapping[str, Any] | None = None,
        reasoning_effort_map: Mapping[str, str] | None = None,
        profile: Profile = PROFILES["0.33"],
    ) -> ParseRequest:
        """Build from a chat completion request body (parsed JSON), its tool
        fields read as the profile's release reads them."""
        tools, tool_choice = body.get("tools"), body.get("tool_choice", UNSET)
        if profile.empty_tools_mean_none and tools == [] and not isinstance(tool_choice, dict):
            # 0.34 (as OpenAI): no tools; "auto"/"required" have nothing to call.
            tools = None
            if tool_choice in ("auto", "required"):
                tool_choice = "none"
        if tool_choice is UNSET:
            tool_choice = "auto" if tools else "none"
        validate_tool_usage(tools, tool_choice, mismatch=profile.named_tool_mismatch,
                            refuse_empty=not profile.empty_tools_mean_none)
        return cls(
            tools=tools,
            tool_choice=tool_choice,
            parallel_tool_calls=body.get("parallel_tool_calls", True),
            include_reasoning=body.get("include_reasoning", True),
            chat_template_kwargs=resolve_chat_template_kwargs(
                body,
                default_chat_template_kwargs=default_chat_template_kwargs,
                reasoning_effort_map=reasoning_effort_map,
            ),
            prompt_token_ids=prompt_token_ids,
            sent_chat_template_kwargs=body.get("chat_template_kwargs") or {},
        )

    @functools.cached_property
    def memo(self) -> dict[Any, Any]:
        """What the parsers derive from this request (with a model's spec) once:
        a stream's request is memoised (stream.py's _Run) and asked every chunk."""
        return {}

    @functools.cached_property
    def named_tool(self) -> str | None:
        """The function name forced by a named tool_choice, else None."""
        if isinstance(self.tool_choice, dict):
            name: str | None = self.tool_choice["function"]["name"]
            return name
        return None

    @functools.cached_property
    def forces_tool_calls(self) -> bool:
        """vLLM's ``_forces_tool_calls``: "required" or a named tool."""
        return self.tool_choice == "required" or self.named_tool is not None


def resolve_chat_template_kwargs(
    body: Mapping[str, Any],
    *,
    default_chat_template_kwargs: Mapping[str, Any] | None = None,
    reasoning_effort_map: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The chat_template_kwargs vLLM's derender passes to the parser.

    Mirrors ``ChatCompletionRequest.build_chat_params(...).with_defaults(...)``:
    request-level fields (reasoning_effort, add_generation_prompt, ...)
    override the request's own chat_template_kwargs, and None/"auto" values
    never override anything.
    """
    effort = body.get("reasoning_effort")
    if effort is not None and reasoning_effort_map:
        effort = reasoning_effort_map.get(effort, effort)
    user_kwargs = body.get("chat_template_kwargs") or {}
    extra: dict[str, Any] = {
        "add_generation_prompt": body.get("add_generation_prompt", True),
        "continue_final_message": body.get("continue_final_message", False),
        "documents": body.get("documents"),
        "reasoning_effort": effort,
    }
    if effort is not None and "enable_thinking" not in user_kwargs:
        extra["enable_thinking"] = effort != "none"
    resolved = _merge_kwargs(user_kwargs, extra)
    if default_chat_template_kwargs:
        resolved = _merge_kwargs(default_chat_template_kwargs, resolved)
    return resolved


def _merge_kwargs(
    defaults: Mapping[str, Any], overrides: Mapping[str, Any]
) -> dict[str, Any]:
    # vLLM's merge_kwargs: None and "auto" mean "unset" and never override.
    return dict(defaults) | {
        k: v for k, v in overrides.items() if v not in (None, "auto")
    }


def _tool_name(tool: Any) -> Any:
    function = tool.get("function") if isinstance(tool, dict) else None
    return function.get("name") if isinstance(function, dict) else None


def validate_tool_usage(
    tools: list[dict[str, Any]] | None, tool_choice: ToolChoice, *,
    mismatch: str = PROFILES["0.33"].named_tool_mismatch, refuse_empty: bool = True,
) -> None:
    """ChatCompletionRequest.check_tool_usage, with vLLM's messages
    (`mismatch`: the release's for a named tool no tool has; 0.34 lets an
    empty list through to that check)."""
    if tools == [] and refuse_empty:
        raise ParserInputError(
            "`tools` must not be an empty array. "
            "Either provide at least one tool or omit the field entirely.",
            parameter="tools",
        )
    if tool_choice == "none" or tool_choice is None:
        return
    if tools is None:
        raise ParserInputError(
            "When using `tool_choice`, `tools` must be set.", parameter="tool_choice"
        )
    if not isinstance(tool_choice, dict):
        if tool_choice in ("auto", "required"):
            return
        raise ParserInputError(
            f"Invalid value for `tool_choice`: {tool_choice}! "
            'Only named tools, "none", "auto" or "required" are supported.',
            parameter="tool_choice",
        )
    function = tool_choice.get("function")
    if not isinstance(function, dict):
        raise ParserInputError(
            f"Invalid value for `function`: `{function}` in `tool_choice`! "
            f"{_CORRECT_USAGE}",
            parameter="tool_choice.function",
        )
    if "name" not in function:
        raise ParserInputError(
            f"Expected field `name` in `function` in `tool_choice`! {_CORRECT_USAGE}",
            parameter="tool_choice.function.name",
        )
    name = function["name"]
    if not isinstance(name, str) or not name:
        raise ParserInputError(
            f"Invalid `name` in `function`: `{name}` in `tool_choice`! "
            f"{_CORRECT_USAGE}",
            parameter="tool_choice.function.name",
        )
    if not any(_tool_name(tool) == name for tool in tools):
        raise ParserInputError(mismatch.format(name=name), parameter="tool_choice")
