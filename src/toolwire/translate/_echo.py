"""The request parameters every Response object repeats (reference §4.1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolwire.protocol import ResponsesRequest, ToolSpec
from toolwire.protocol._tool_cache import TOOL_LISTS

JSON = dict[str, Any]

# Request fields a Response echoes when the client sent them (reference §4.1).
_ECHOED_EXTRA = (
    "background",
    "max_tool_calls",
    "prompt_cache_key",
    "prompt_cache_retention",
    "safety_identifier",
    "service_tier",
    "top_logprobs",
    "truncation",
)


def echo_request(request: ResponsesRequest) -> JSON:
    """The request parameters every Response object repeats, in Responses shape."""
    echo: JSON = {
        "instructions": request.instructions,
        # A client that resends its tools gets the very same specs (the tool-list cache):
        # their echo is built once, and shared by every Response echoing them.
        "tools": TOOL_LISTS.derived(request.tools or (), _echoed_tools),
        "tool_choice": request.tool_choice if request.tool_choice is not None else "auto",
        "parallel_tool_calls": request.parallel_tool_calls
        if request.parallel_tool_calls is not None
        else True,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "max_output_tokens": request.max_output_tokens,
        "previous_response_id": request.previous_response_id,
        "reasoning": request.reasoning,
        "text": request.text if request.text is not None else {"format": {"type": "text"}},
        "metadata": request.metadata if request.metadata is not None else {},
        "store": request.store if request.store is not None else True,
        "user": request.user,
        "truncation": "disabled",
    }
    extra = request.model_extra or {}
    for key in _ECHOED_EXTRA:
        if key in extra:
            echo[key] = extra[key]
    return echo


def _echoed_tools(tools: Sequence[ToolSpec]) -> list[JSON]:
    """The ``tools`` a Response repeats: the specs as the client sent them (read-only)."""
    return [tool.shared_dump() for tool in tools]
