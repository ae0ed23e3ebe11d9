"""A whole Response as the events a stream would have carried it in.

A server or proxy that ignores ``stream`` answers a streamed request with one JSON
object; whoever reads streams (the gateway restoring a Responses backend's answer, the
agent runtime reading its model's) reads that object as the stream it stands for.
"""

from __future__ import annotations

from typing import Any

__all__ = ["response_as_events"]

JSON = dict[str, Any]

_TERMINAL_BY_STATUS = {"incomplete": "response.incomplete", "failed": "response.failed", "cancelled": "response.failed"}


def response_as_events(answer: JSON) -> list[JSON]:
    """A whole Response as the events a stream would have carried it in: created, each
    output item added and done, then the terminal event its status says (completed unless
    it says incomplete or failed). An error object instead of a Response (``{"error":
    {...}}``) is a response created, then failed with that error."""
    opening = {**answer, "status": "in_progress", "output": [], "usage": None, "error": None, "incomplete_details": None}
    events: list[JSON] = [{"type": "response.created", "response": opening}]
    error = answer.get("error")
    if "output" not in answer and error:
        fields = error if isinstance(error, dict) else {"message": str(error)}
        code, message = fields.get("code"), fields.get("message")
        failure = {
            "code": code if isinstance(code, str) and code else "server_error",
            "message": message if isinstance(message, str) and message else "The upstream reported an error.",
        }
        events.append({"type": "response.failed", "response": {**answer, "status": "failed", "output": [], "error": failure}})
        return events
    output = answer.get("output")
    items = [item for item in output if isinstance(item, dict)] if isinstance(output, list) else []
    for index, item in enumerate(items):
        events += _item_as_events(index, item)
    status = answer.get("status")
    terminal = _TERMINAL_BY_STATUS.get(status, "response.completed") if isinstance(status, str) else "response.completed"
    ended = {"response.completed": "completed", "response.incomplete": "incomplete"}.get(terminal, "failed")
    events.append({"type": terminal, "response": {**answer, "status": ended, "output": items}})
    return events


def _item_as_events(index: int, item: JSON) -> list[JSON]:
    """One whole output item as a stream carries it. A call opens empty and its arguments
    (or input) follow, as a delta and a done, so that a client adding up the deltas gets
    them once; every other item is added and done as it is (no deltas follow)."""
    kind, item_id = item.get("type"), item.get("id")
    where = {"output_index": index, "item_id": item_id}
    arguments = item.get("arguments")
    text = item.get("input")
    added: JSON = item
    between: list[JSON] = []
    if kind == "function_call" and isinstance(arguments, str):
        added = {**item, "status": "in_progress", "arguments": ""}
        between = [
            {"type": "response.function_call_arguments.delta", **where, "delta": arguments},
            {"type": "response.function_call_arguments.done", **where, "arguments": arguments, "name": item.get("name")},
        ]
    elif kind == "custom_tool_call" and isinstance(text, str):
        added = {**item, "status": "in_progress", "input": ""}
        between = [
            {"type": "response.custom_tool_call_input.delta", **where, "delta": text},
            {"type": "response.custom_tool_call_input.done", **where, "input": text},
        ]
    return [
        {"type": "response.output_item.added", "output_index": index, "item": added},
        *between,
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]
