"""What a call carries, by the kind of tool it is for, the call itself, and
``decode_call``: the one function from a completed call item to a call."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson

from toolwire.protocol import (
    CustomToolCallItem,
    FunctionCallItem,
    Item,
    ToolSearchCallItem,
    parse_item,
)

from ._errors import RespondToModel
from ._names import ToolName


class ToolKind(StrEnum):
    """The kind of a declared tool, which is also the kind of payload its calls carry."""

    FUNCTION = "function"
    CUSTOM = "custom"
    TOOL_SEARCH = "tool_search"
    HOSTED = "hosted"


@dataclass(frozen=True, slots=True)
class FunctionPayload:
    """The raw JSON arguments string; only the tool's handler parses it."""

    arguments: str
    kind: ToolKind = ToolKind.FUNCTION


@dataclass(frozen=True, slots=True)
class CustomPayload:
    """The raw text input of a freeform tool (a patch, JavaScript, ...)."""

    input: str
    kind: ToolKind = ToolKind.CUSTOM


@dataclass(frozen=True, slots=True)
class ToolSearchPayload:
    """The parsed arguments of a client-executed tool search."""

    arguments: Any
    kind: ToolKind = ToolKind.TOOL_SEARCH


ToolPayload = FunctionPayload | CustomPayload | ToolSearchPayload


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call decoded from a completed call item."""

    tool_name: ToolName
    call_id: str
    payload: ToolPayload


def decode_call(item: Item | dict[str, Any]) -> ToolCall | None:
    """The call a completed item makes, or None if the item is not a local tool call.

    A ``tool_search_call`` is a local call only when ``execution`` is ``"client"`` and it
    has a ``call_id``; its arguments may arrive as an object or as a JSON string holding
    one. Arguments that are not a JSON object raise ``RespondToModel``.
    """
    if isinstance(item, dict):
        item = parse_item(item)
    if isinstance(item, FunctionCallItem):
        return ToolCall(ToolName(item.namespace, item.name), item.call_id, FunctionPayload(item.arguments))
    if isinstance(item, CustomToolCallItem):
        return ToolCall(ToolName(item.namespace, item.name), item.call_id, CustomPayload(item.input))
    if isinstance(item, ToolSearchCallItem):
        if item.execution != "client" or not item.call_id:
            return None
        arguments = item.arguments
        if isinstance(arguments, str):
            try:
                arguments = orjson.loads(arguments)
            except orjson.JSONDecodeError as exc:
                raise RespondToModel(f"failed to parse tool_search arguments: {exc}") from exc
        if not isinstance(arguments, dict):
            raise RespondToModel("failed to parse tool_search arguments: expected a JSON object")
        return ToolCall(ToolName(None, "tool_search"), item.call_id, ToolSearchPayload(arguments))
    return None
