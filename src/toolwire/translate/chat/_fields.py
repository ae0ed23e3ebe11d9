"""The generation fields of a translated request: token limit, sampling, output format,
reasoning effort and streaming, under the names the backend's profile gives them.

A field with no Chat Completions equivalent (or that the backend does not take) is not
sent, and one warning names them all (``.._fields``: also the fields no wire translates);
the Responses server's own bookkeeping (``store``, ``metadata``, ...) is dropped silently.
"""

from __future__ import annotations

from typing import Any, cast

from toolwire.errors import RequestError
from toolwire.protocol import ChatRequest, ResponsesRequest

from .._fields import note_lost_fields, read_text_format
from .._notes import Notes
from .profile import BackendProfile


def add_generation_fields(
    chat: ChatRequest, request: ResponsesRequest, profile: BackendProfile, notes: Notes
) -> None:
    """Token limit, sampling, output format, reasoning effort and streaming."""
    lost: list[str] = []
    if request.max_output_tokens is not None:
        cast("dict[str, Any]", chat)[profile.max_tokens_field] = request.max_output_tokens
    if request.temperature is not None:
        chat["temperature"] = request.temperature
    if request.top_p is not None:
        chat["top_p"] = request.top_p
    _add_response_format(chat, request.text or {}, profile, notes, lost)
    _add_reasoning_effort(chat, request.reasoning or {}, profile, lost)
    if request.stream:
        chat["stream"] = True
        if profile.stream_usage:
            chat["stream_options"] = {"include_usage": True}
    note_lost_fields(request, lost, notes, "Chat Completions")


def _add_response_format(
    chat: ChatRequest, text: dict[str, Any], profile: BackendProfile, notes: Notes, lost: list[str]
) -> None:
    text_format = read_text_format(text, lost)
    if text_format is None:
        return
    kind = text_format.get("type")
    if kind == "text":
        return
    if kind == "json_object":
        response_format: dict[str, Any] = {"type": "json_object"}
    elif kind == "json_schema":
        name, schema = text_format.get("name"), text_format.get("schema")
        if not isinstance(name, str):
            raise RequestError(
                "Invalid 'text.format.name': expected a string.", param="text.format.name"
            )
        if not isinstance(schema, dict):
            raise RequestError(
                "Invalid 'text.format.schema': expected an object.", param="text.format.schema"
            )
        json_schema: dict[str, Any] = {"name": name, "schema": schema}
        for key in ("strict", "description"):
            if text_format.get(key) is not None:
                json_schema[key] = text_format[key]
        response_format = {"type": "json_schema", "json_schema": json_schema}
    else:
        lost.append(f"text.format ({kind})")
        return
    if not profile.supports_response_format:
        lost.append("text.format")
        return
    chat["response_format"] = response_format
    notes.convert(f"text.format {kind} sent as response_format")


def _add_reasoning_effort(
    chat: ChatRequest, reasoning: dict[str, Any], profile: BackendProfile, lost: list[str]
) -> None:
    for key, value in reasoning.items():
        if value is None or key == "context":  # context: how the client replays reasoning
            continue
        if key == "effort" and isinstance(value, str) and profile.supports_reasoning_effort:
            chat["reasoning_effort"] = value
        else:
            lost.append(f"reasoning.{key}")
