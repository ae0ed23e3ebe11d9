"""The request parameters every Response object repeats (reference §4.1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolwire.protocol import ResponsesRequest, ToolSpec
from toolwire.protocol._tool_cache import LeastRecentlyUsed

JSON = dict[str, Any]

# The echoed ``tools`` of the last tool lists seen, by the identity of their specs: a
# client that resends the same tools gets the very same spec objects (the tool-list
# cache), so their echo is built once. Each entry holds its specs, so no id is reused
# while it is kept. The lists are shared by every Response echoing them: never mutated.
_ECHOED_TOOLS: LeastRecentlyUsed[tuple[int, ...], tuple[tuple[ToolSpec, ...], list[JSON]]] = LeastRecentlyUsed(64)

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
        "tools": echoed_tools(request.tools or ()),
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


def echoed_tools(tools: Sequence[ToolSpec]) -> list[JSON]:
    """The ``tools`` a Response repeats: the specs as the client sent them (shared, read-only)."""
    if not tools:
        return []
    key = tuple(id(tool) for tool in tools)
    kept = _ECHOED_TOOLS.get(key)
    if kept is not None:
        return kept[1]
    echoed = [tool.shared_dump() for tool in tools]
    _ECHOED_TOOLS.put(key, (tuple(tools), echoed))
    return echoed
