"""A scripted Responses model: the in-memory fake beside ``HttpResponsesClient``.

``response_stream(reply)`` is a pure function from a scripted reply to the SSE frames a
real Responses server sends (``response.created``, ``response.in_progress``, per item
``output_item.added`` / a delta / ``output_item.done``, then one terminal event whose
``response.output`` holds every item). ``ScriptedResponsesClient`` serves those frames
to the agent loop and records each request body; test servers reuse the same frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from toolwire.errors import UpstreamError
from toolwire.protocol import encode_event

from ._client import ByteStream


@dataclass(frozen=True)
class ScriptedResponse:
    """One response: its output items, and how its stream ends.

    ``status`` picks the terminal event (``response.completed``, ``.failed`` or
    ``.incomplete``); ``stall_after`` stops the stream after that many events and then
    sends nothing, forever (for cancellation tests).
    """

    output: Sequence[Mapping[str, Any]] = ()
    status: Literal["completed", "failed", "incomplete"] = "completed"
    error_message: str = "scripted failure"
    stall_after: int | None = None


def assistant_message(text: str, *, item_id: str = "msg_1") -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {
        "id": item_id,
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [part],
    }


def function_call(
    name: str, arguments: str, call_id: str, *, namespace: str | None = None
) -> dict[str, Any]:
    return _call_item("function_call", f"fc_{call_id}", call_id, name, namespace, arguments=arguments)


def custom_tool_call(
    name: str, text: str, call_id: str, *, namespace: str | None = None
) -> dict[str, Any]:
    return _call_item("custom_tool_call", f"ctc_{call_id}", call_id, name, namespace, input=text)


def _call_item(
    kind: str, item_id: str, call_id: str, name: str, namespace: str | None, **payload: str
) -> dict[str, Any]:
    """A completed call item; ``payload`` is its ``arguments`` or ``input``."""
    item = {"id": item_id, "type": kind, "status": "completed", "call_id": call_id, "name": name, **payload}
    if namespace is not None:
        item["namespace"] = namespace
    return item


def response_events(
    reply: ScriptedResponse, *, response_id: str = "resp_scripted", model: str = "scripted"
) -> list[dict[str, Any]]:
    """Every event of the reply's stream, ``sequence_number`` included."""
    output = [dict(item) for item in reply.output]
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response(response_id, model, "in_progress", [])},
        {
            "type": "response.in_progress",
            "response": _response(response_id, model, "in_progress", []),
        },
    ]
    for index, item in enumerate(output):
        events += _item_events(index, item)
    terminal = _response(response_id, model, reply.status, output)
    if reply.status == "failed":
        terminal["error"] = {"code": "server_error", "message": reply.error_message}
    if reply.status == "incomplete":
        terminal["incomplete_details"] = {"reason": "max_output_tokens"}
    events.append({"type": f"response.{reply.status}", "response": terminal})
    return [{**event, "sequence_number": number} for number, event in enumerate(events)]


def response_stream(reply: ScriptedResponse, **names: str) -> list[bytes]:
    """The reply's SSE frames, one per event (before any stall)."""
    events = response_events(reply, **names)
    if reply.stall_after is not None:
        events = events[: reply.stall_after]
    return [encode_event(orjson.dumps(event), event=event["type"]) for event in events]


def _response(
    response_id: str, model: str, status: str, output: list[dict[str, Any]]
) -> dict[str, Any]:
    usage = None
    if status != "in_progress":
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
    return {
        "id": response_id,
        "object": "response",
        "created_at": 1_750_000_000,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage,
    }


def _item_events(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    """``output_item.added`` with the item still empty, one delta, ``output_item.done``."""
    kind = item.get("type")
    item_id = item.get("id", f"item_{index}")
    where = {"item_id": item_id, "output_index": index}
    started = {**item, "status": "in_progress"}
    delta: dict[str, Any] | None = None
    if kind == "function_call":
        started["arguments"] = ""
        delta = {
            "type": "response.function_call_arguments.delta",
            **where,
            "delta": item.get("arguments", ""),
        }
    elif kind == "custom_tool_call":
        started["input"] = ""
        delta = {
            "type": "response.custom_tool_call_input.delta",
            **where,
            "delta": item.get("input", ""),
        }
    elif kind == "message":
        started["content"] = []
        text = "".join(
            part.get("text", "") for part in item.get("content", []) if isinstance(part, dict)
        )
        delta = {
            "type": "response.output_text.delta",
            **where,
            "content_index": 0,
            "delta": text,
            "logprobs": [],
        }
    events = [{"type": "response.output_item.added", "output_index": index, "item": started}]
    if delta is not None:
        events.append(delta)
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


class ScriptedResponsesClient:
    """Serves scripted responses in order, one per request, and records each body.

    ``closed`` counts the streams whose context was left (finished or cancelled).
    """

    def __init__(self, *replies: ScriptedResponse) -> None:
        self._queue: deque[ScriptedResponse] = deque(replies)
        self.requests: list[dict[str, Any]] = []
        self.closed = 0

    def enqueue(self, *replies: ScriptedResponse) -> None:
        self._queue.extend(replies)

    @contextlib.asynccontextmanager
    async def stream(self, body: Mapping[str, Any]) -> AsyncIterator[ByteStream]:
        self.requests.append(copy.deepcopy(dict(body)))
        if not self._queue:
            raise UpstreamError(f"The script ran out at request #{len(self.requests) - 1}.")
        reply = self._queue.popleft()
        try:
            yield self._frames(reply, len(self.requests) - 1)
        finally:
            self.closed += 1

    async def _frames(self, reply: ScriptedResponse, index: int) -> ByteStream:
        for frame in response_stream(reply, response_id=f"resp_{index}"):
            yield frame
            await asyncio.sleep(0)
        if reply.stall_after is not None:
            await asyncio.Event().wait()
