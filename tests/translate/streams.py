"""Responses event streams in a form a test can spell out whole.

``readable(events)`` is what a client reads, with what is random-looking made legible:
the fresh item ids (``msg_<32 hex>``) and call ids (``call_<24 hex>``) become ``msg#1``,
``msg#2``, ``call#1``, ... in order of first appearance (one item keeps one id across its events), ``sequence_number`` is dropped
(the tests check it counts 0, 1, 2, ... apart), a lifecycle event's Response keeps only
what changes along a stream (``status``, ``output``, ``usage``, ``error``,
``incomplete_details``), and a sealed ``encrypted_content`` is shown opened
(``{"sealed": [blocks]}`` or ``{"sealed": text}``).
"""

from __future__ import annotations

import re
from typing import Any

from toolwire.translate import open_reasoning, open_reasoning_blocks

JSON = dict[str, Any]
_FRESH_ID = re.compile(r"^([a-z]+)_(?:[0-9a-f]{32}|[0-9a-f]{24})$")
_CHANGING = ("status", "output", "usage", "error", "incomplete_details")


def readable(events: list[Any]) -> list[JSON]:
    ids: dict[str, str] = {}
    out = []
    for event in events:
        shown = {key: value for key, value in event.items() if key != "sequence_number"}
        if isinstance(shown.get("response"), dict):
            shown["response"] = {key: shown["response"][key] for key in _CHANGING}
        out.append(_legible(shown, ids))
    return out


def readable_response(response: JSON) -> JSON:
    """A Response object with its fresh ids and sealed reasoning made legible."""
    return _legible(response, {})  # type: ignore[no-any-return]


def _legible(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, dict):
        shown = {key: _legible(inner, ids) for key, inner in value.items()}
        sealed = value.get("encrypted_content")
        if isinstance(sealed, str):
            blocks = open_reasoning_blocks(sealed)
            shown["encrypted_content"] = {"sealed": blocks if blocks is not None else open_reasoning(sealed)}
        return shown
    if isinstance(value, list):
        return [_legible(inner, ids) for inner in value]
    if isinstance(value, str):
        match = _FRESH_ID.match(value)
        if match is not None:
            if value not in ids:
                prefix = match.group(1)
                ids[value] = f"{prefix}#{sum(1 for known in ids.values() if known.startswith(prefix + '#')) + 1}"
            return ids[value]
    return value


# ---------------------------------------------------------------- the events, as readable() shows them


def lifecycle(kind: str, status: str, output: list[JSON] | None = None, **changed: Any) -> JSON:
    """``response.<kind>``; ``changed`` sets ``usage``, ``error`` or ``incomplete_details``."""
    response = {"status": status, "output": output or [], "usage": None, "error": None, "incomplete_details": None}
    return {"type": f"response.{kind}", "response": {**response, **changed}}


BEGUN = [lifecycle("created", "in_progress"), lifecycle("in_progress", "in_progress")]


def item_added(index: int, item: JSON) -> JSON:
    return {"type": "response.output_item.added", "output_index": index, "item": item}


def item_done(index: int, item: JSON) -> JSON:
    return {"type": "response.output_item.done", "output_index": index, "item": item}


def part_event(kind: str, item_id: str, index: int, part: JSON, content_index: int = 0) -> JSON:
    return {"type": f"response.content_part.{kind}", "item_id": item_id, "output_index": index, "content_index": content_index, "part": part}


def output_text(text: str) -> JSON:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message(item_id: str, text: str, status: str = "completed") -> JSON:
    return {"id": item_id, "type": "message", "status": status, "role": "assistant", "content": [output_text(text)]}


def message_events(item_id: str, index: int, deltas: list[str], status: str = "completed") -> list[JSON]:
    """A message with one ``output_text`` part, from ``.added`` to ``.done``."""
    text = "".join(deltas)
    where = {"item_id": item_id, "output_index": index, "content_index": 0}
    return [
        item_added(index, {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}),
        part_event("added", item_id, index, output_text("")),
        *({"type": "response.output_text.delta", **where, "delta": delta, "logprobs": []} for delta in deltas),
        {"type": "response.output_text.done", **where, "text": text, "logprobs": []},
        part_event("done", item_id, index, output_text(text)),
        item_done(index, message(item_id, text, status)),
    ]


def function_call(item_id: str, call_id: str, name: str, arguments: str, status: str = "completed", **extra: Any) -> JSON:
    return {"id": item_id, "type": "function_call", "status": status, "call_id": call_id, "name": name, "arguments": arguments, **extra}


def function_call_events(item: JSON, index: int, deltas: list[str]) -> list[JSON]:
    where = {"item_id": item["id"], "output_index": index}
    return [
        item_added(index, {**item, "status": "in_progress", "arguments": ""}),
        *({"type": "response.function_call_arguments.delta", **where, "delta": delta} for delta in deltas),
        {"type": "response.function_call_arguments.done", **where, "arguments": item["arguments"], "name": item["name"]},
        item_done(index, item),
    ]


def custom_call(item_id: str, call_id: str, name: str, text: str, status: str = "completed", **extra: Any) -> JSON:
    return {"id": item_id, "type": "custom_tool_call", "status": status, "call_id": call_id, "name": name, "input": text, **extra}


def custom_call_events(item: JSON, index: int, deltas: list[str]) -> list[JSON]:
    where = {"item_id": item["id"], "output_index": index}
    return [
        item_added(index, {**item, "status": "in_progress", "input": ""}),
        *({"type": "response.custom_tool_call_input.delta", **where, "delta": delta} for delta in deltas),
        {"type": "response.custom_tool_call_input.done", **where, "input": item["input"]},
        item_done(index, item),
    ]


def reasoning_text(text: str) -> JSON:
    return {"type": "reasoning_text", "text": text}


def reasoning_events(item: JSON, index: int, deltas: list[str]) -> list[JSON]:
    """A reasoning item whose raw text streams as ``reasoning_text`` (one part)."""
    text = "".join(deltas)
    where = {"item_id": item["id"], "output_index": index, "content_index": 0}
    return [
        item_added(index, {"id": item["id"], "type": "reasoning", "status": "in_progress", "summary": [], "content": []}),
        part_event("added", item["id"], index, reasoning_text("")),
        *({"type": "response.reasoning_text.delta", **where, "delta": delta} for delta in deltas),
        {"type": "response.reasoning_text.done", **where, "text": text},
        part_event("done", item["id"], index, reasoning_text(text)),
        item_done(index, item),
    ]


def error_event(message: str, code: str = "server_error") -> JSON:
    error_type = "invalid_request_error" if code == "context_length_exceeded" else "server_error"
    return {
        "type": "error",
        "code": code,
        "message": message,
        "param": None,
        "error": {"type": error_type, "code": code, "message": message, "param": None},
    }
