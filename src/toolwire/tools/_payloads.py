"""What a call carries, by the kind of tool it is for, and the call itself."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

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
