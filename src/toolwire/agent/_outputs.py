"""A call's output as the item type that matches the call, paired by ``call_id``.

``function_call`` -> ``function_call_output``, ``custom_tool_call`` ->
``custom_tool_call_output``, a client ``tool_search_call`` -> ``tool_search_output``.
The kind of the *call* decides, never the kind of the tool it was aimed at.
"""

from __future__ import annotations

from toolwire.protocol import (
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    Item,
    ToolSearchCallItem,
    ToolSearchOutputItem,
)
from toolwire.tools import ToolCall, ToolKind

from ._handlers import ToolOutput

OutputItem = FunctionCallOutputItem | CustomToolCallOutputItem | ToolSearchOutputItem


def output_for_call(call: ToolCall, output: ToolOutput) -> OutputItem:
    """The output item answering ``call``."""
    if call.payload.kind is ToolKind.CUSTOM:
        return CustomToolCallOutputItem(
            type="custom_tool_call_output", call_id=call.call_id, output=output.content
        )
    if call.payload.kind is ToolKind.TOOL_SEARCH:
        return ToolSearchOutputItem(
            type="tool_search_output",
            call_id=call.call_id,
            execution="client",
            status="completed",
            tools=list(output.tools),
        )
    return FunctionCallOutputItem(
        type="function_call_output", call_id=call.call_id, output=output.content
    )


def message_for_item(item: Item, message: str) -> OutputItem | None:
    """The output telling the model ``message`` about a call item that never became a call
    (its arguments could not be decoded); None for an item that is not a call."""
    if isinstance(item, FunctionCallItem):
        return FunctionCallOutputItem(
            type="function_call_output", call_id=item.call_id, output=message
        )
    if isinstance(item, CustomToolCallItem):
        return CustomToolCallOutputItem(
            type="custom_tool_call_output", call_id=item.call_id, output=message
        )
    if isinstance(item, ToolSearchCallItem) and item.call_id:
        # Codex answers a failed search with no tools; the message has no place to go.
        return ToolSearchOutputItem(
            type="tool_search_output",
            call_id=item.call_id,
            execution="client",
            status="completed",
            tools=[],
        )
    return None


def output_text(item: OutputItem) -> str:
    """The text of an output, for progress display."""
    if isinstance(item, ToolSearchOutputItem):
        return f"{len(item.tools)} tools"
    if isinstance(item.output, str):
        return item.output
    parts = []
    for part in item.output:
        text = getattr(part, "text", None)
        parts.append(text if isinstance(text, str) else f"[{part.type}]")
    return "\n".join(parts)
