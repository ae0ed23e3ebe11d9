"""Responses stream events: the JSON objects sent as SSE ``data`` on ``POST /v1/responses``.

Events are plain dicts typed with TypedDicts: they are built on the hot path, one per
upstream chunk, and serialized straight to JSON, so they are never validated at run time.
The shapes follow what the official SDK requires in strict mode: every event has
``type`` and ``sequence_number``; text deltas carry ``logprobs: []``.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict, get_args, get_type_hints

import orjson

from toolwire.errors import UpstreamProtocolError

JSON = dict[str, Any]


class ResponseLifecycleEvent(TypedDict):
    """response.created / in_progress / queued / completed / failed / incomplete."""

    type: Literal[
        "response.created",
        "response.in_progress",
        "response.queued",
        "response.completed",
        "response.failed",
        "response.incomplete",
    ]
    sequence_number: int
    response: JSON


class OutputItemEvent(TypedDict):
    """response.output_item.added / done."""

    type: Literal["response.output_item.added", "response.output_item.done"]
    sequence_number: int
    output_index: int
    item: JSON


class ContentPartEvent(TypedDict):
    """response.content_part.added / done."""

    type: Literal["response.content_part.added", "response.content_part.done"]
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    part: JSON


class OutputTextDeltaEvent(TypedDict):
    type: Literal["response.output_text.delta"]
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    delta: str
    logprobs: list[Any]


class OutputTextDoneEvent(TypedDict):
    type: Literal["response.output_text.done"]
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    text: str
    logprobs: list[Any]


class RefusalDeltaEvent(TypedDict):
    type: Literal["response.refusal.delta"]
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    delta: str


class RefusalDoneEvent(TypedDict):
    type: Literal["response.refusal.done"]
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    refusal: str


class FunctionCallArgumentsDeltaEvent(TypedDict):
    type: Literal["response.function_call_arguments.delta"]
    sequence_number: int
    item_id: str
    output_index: int
    delta: str


class FunctionCallArgumentsDoneEvent(TypedDict):
    type: Literal["response.function_call_arguments.done"]
    sequence_number: int
    item_id: str
    output_index: int
    arguments: str
    name: NotRequired[str]


class CustomToolCallInputDeltaEvent(TypedDict):
    type: Literal["response.custom_tool_call_input.delta"]
    sequence_number: int
    item_id: str
    output_index: int
    delta: str


class CustomToolCallInputDoneEvent(TypedDict):
    type: Literal["response.custom_tool_call_input.done"]
    sequence_number: int
    item_id: str
    output_index: int
    input: str


class ReasoningSummaryPartEvent(TypedDict):
    """response.reasoning_summary_part.added / done."""

    type: Literal["response.reasoning_summary_part.added", "response.reasoning_summary_part.done"]
    sequence_number: int
    item_id: str
    output_index: int
    summary_index: int
    part: JSON


class ReasoningSummaryTextDeltaEvent(TypedDict):
    type: Literal["response.reasoning_summary_text.delta"]
    sequence_number: int
    item_id: str
    output_index: int
    summary_index: int
    delta: str


class ReasoningSummaryTextDoneEvent(TypedDict):
    type: Literal["response.reasoning_summary_text.done"]
    sequence_number: int
    item_id: str
    output_index: int
    summary_index: int
    text: str


class ReasoningTextDeltaEvent(TypedDict):
    type: Literal["response.reasoning_text.delta"]
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    delta: str


class ReasoningTextDoneEvent(TypedDict):
    type: Literal["response.reasoning_text.done"]
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    text: str


class ErrorEvent(TypedDict):
    """An in-stream error, in the flat (spec) form plus OpenAI's nested ``error`` object."""

    type: Literal["error"]
    sequence_number: int
    code: str | None
    message: str
    param: str | None
    error: NotRequired[JSON]


StreamEvent = (
    ResponseLifecycleEvent
    | OutputItemEvent
    | ContentPartEvent
    | OutputTextDeltaEvent
    | OutputTextDoneEvent
    | RefusalDeltaEvent
    | RefusalDoneEvent
    | FunctionCallArgumentsDeltaEvent
    | FunctionCallArgumentsDoneEvent
    | CustomToolCallInputDeltaEvent
    | CustomToolCallInputDoneEvent
    | ReasoningSummaryPartEvent
    | ReasoningSummaryTextDeltaEvent
    | ReasoningSummaryTextDoneEvent
    | ReasoningTextDeltaEvent
    | ReasoningTextDoneEvent
    | ErrorEvent
)
"""Every Responses stream event a Chat-backed gateway emits (reference §2)."""

def _event_types(*events: type) -> frozenset[str]:
    """The ``type`` values the event TypedDicts declare, read from their annotations."""
    return frozenset(value for event in events for value in get_args(get_type_hints(event)["type"]))


EVENT_TYPES = _event_types(*get_args(StreamEvent))
"""Every event ``type`` above, once: read from the TypedDicts themselves."""

TERMINAL_EVENT_TYPES = frozenset({"response.completed", "response.failed", "response.incomplete"})


def parse_event(data: str | bytes) -> JSON:
    """Decode one SSE ``data`` payload of a Responses stream into its event object.

    Only the envelope is checked (a JSON object with a string ``type``); event types
    this module does not list are returned as they are, for the caller to ignore.
    """
    try:
        event = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise UpstreamProtocolError(f"Stream event is not valid JSON: {exc}.") from exc
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise UpstreamProtocolError("Stream event is not a JSON object with a string 'type'.")
    return event
