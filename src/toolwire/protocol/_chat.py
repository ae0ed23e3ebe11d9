"""Chat Completions shapes: the request toolwire sends upstream and the chunks it reads back.

TypedDicts, not models: upstream JSON is read tolerantly (backends disagree on
details, see the reference §7), and requests are built as plain dicts.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict


class ChatFunction(TypedDict):
    name: str
    arguments: str


class ChatToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: ChatFunction


class ChatMessage(TypedDict, total=False):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None
    tool_calls: list[ChatToolCall]
    tool_call_id: str
    reasoning_content: str
    reasoning: str


class ChatFunctionSpec(TypedDict):
    name: str
    description: NotRequired[str]
    parameters: dict[str, Any]
    strict: NotRequired[bool]


class ChatTool(TypedDict):
    type: Literal["function"]
    function: ChatFunctionSpec


class ChatRequest(TypedDict, total=False):
    model: str
    messages: list[ChatMessage]
    tools: list[ChatTool]
    tool_choice: str | dict[str, Any]
    parallel_tool_calls: bool
    max_tokens: int
    max_completion_tokens: int
    temperature: float
    top_p: float
    response_format: dict[str, Any]
    reasoning_effort: str
    stream: bool
    stream_options: dict[str, Any]


class ChatToolCallDelta(TypedDict, total=False):
    index: int
    id: str
    type: str
    function: dict[str, Any]


class ChatDelta(TypedDict, total=False):
    role: str
    content: str | None
    refusal: str | None
    reasoning_content: str | None
    reasoning: str | None
    tool_calls: list[ChatToolCallDelta] | None


class ChatChoiceChunk(TypedDict, total=False):
    index: int
    delta: ChatDelta
    finish_reason: str | None
    logprobs: dict[str, Any] | None


class ChatUsage(TypedDict, total=False):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: dict[str, Any] | None
    completion_tokens_details: dict[str, Any] | None
    prompt_cache_hit_tokens: int


class ChatChunk(TypedDict, total=False):
    """One ``chat.completion.chunk`` (or an in-stream ``{"error": ...}`` object)."""

    id: str
    object: str
    created: int
    model: str
    choices: list[ChatChoiceChunk]
    usage: ChatUsage | None
    error: Any


class ChatChoice(TypedDict, total=False):
    index: int
    message: dict[str, Any]
    finish_reason: str | None


class ChatCompletion(TypedDict, total=False):
    """A non-streaming ``chat.completion`` object."""

    id: str
    object: str
    created: int
    model: str
    choices: list[ChatChoice]
    usage: ChatUsage | None
