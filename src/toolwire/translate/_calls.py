"""A tool call of a backend's stream, from its first fragment to the item the client gets.

A fragment (``CallFragment``) is what one delta of a Chat stream says about one call (a
``tool_calls[]`` entry, or a call written into the text); an Anthropic ``tool_use``
block's JSON deltas go straight into its ``OpenCall``.

``OpenCall`` gathers a call's fragments; its ``CallState`` says whether it waits (no name
yet, or another item is open), streams, or is done. When it goes live, ``CallReader``
finds the declared tool it names (the flat upstream name, else the one tool its own or
dotted name fits), and when it closes, reads its arguments the way the client's tool
wants them: a custom tool's raw input recovered from the JSON wrapper, a strict
function's arguments repaired into valid JSON, a tool_search's arguments as an object.
Every repair is noted in the translator's ``conversions``. ``call_item`` is the item
itself, the same shape when added and when done.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

from toolwire.protocol import FunctionTool
from toolwire.tools import ToolKind

from ._json_repair import json_or_none, repair_json
from ._tools import name_fields, wrap_raw_input
from .custom_input import recover_custom_input
from .tool_table import UpstreamTool, UpstreamToolTable

JSON = dict[str, Any]


@dataclass(slots=True)
class CallFragment:
    """One ``tool_calls[]`` delta entry (or a whole call, Ollama style)."""

    index: int | None
    upstream_id: str | None
    name: str | None
    arguments: str
    native_input: str | None = None  # a native custom call's raw input (OpenAI ``custom``)
ItemStatus = Literal["completed", "incomplete"]

_SAFE_CALL_ID = re.compile(r"[A-Za-z0-9_-]{1,40}")
_ITEM_TYPES = {
    ToolKind.CUSTOM: ("custom_tool_call", "ctc"),
    ToolKind.TOOL_SEARCH: ("tool_search_call", "tsc"),
}
_FUNCTION_ITEM = ("function_call", "fc")


class CallState(Enum):
    """Where a call is on its way to the client."""

    WAITING = "waiting"
    """Buffered: no name yet, or another item is open."""
    LIVE = "live"
    """Added (``output_item.added``) and streaming."""
    CLOSED = "closed"
    """Done (``output_item.done``): later fragments are dropped."""


# The members bound once: looking up an Enum member costs ~60 ns in Python 3.11, and the
# stream translator compares call states for every fragment.
WAITING, LIVE, CLOSED = CallState.WAITING, CallState.LIVE, CallState.CLOSED


@dataclass(slots=True)
class OpenCall:
    """A tool call from its first fragment until its ``output_item.done``.

    The item fields (``item_id`` ... ``client_name``) are set when it goes live.
    """

    upstream_id: str | None
    name: str | None = None
    fragments: list[str] = field(default_factory=list)
    native_input: list[str] | None = None
    state: CallState = WAITING
    tool: UpstreamTool | None = None
    item_id: str = ""
    output_index: int = -1
    call_id: str = ""
    namespace: str | None = None
    client_name: str = ""

    @property
    def arguments(self) -> str:
        if len(self.fragments) > 1:
            self.fragments[:] = ["".join(self.fragments)]
        return self.fragments[0] if self.fragments else ""

    @property
    def kind(self) -> ToolKind:
        return self.tool.kind if self.tool is not None else ToolKind.FUNCTION

    def looks_complete(self) -> bool:
        """Whether the arguments so far are a whole JSON value (the upstream moved on)."""
        if self.native_input is not None:
            return True
        text = self.arguments.rstrip()
        return text.endswith(("}", "]")) and json_or_none(text) is not None

    def starts_another_call(self, fragment: CallFragment) -> bool:
        """Whether a fragment at this call's index is really the start of another call."""
        if self.name is None:
            return False
        if fragment.upstream_id is not None and self.upstream_id is not None:
            return fragment.upstream_id != self.upstream_id
        return fragment.name is not None and self.looks_complete()


def call_item(call: OpenCall, status: str, value: str | JSON) -> JSON:
    """The call's item: a ``function_call`` (``value``: its arguments), a
    ``custom_tool_call`` (its raw input) or a ``tool_search_call`` (its arguments object)."""
    kind = call.kind
    item: JSON = {
        "id": call.item_id,
        "type": _ITEM_TYPES.get(kind, _FUNCTION_ITEM)[0],
        "status": status,
        "call_id": call.call_id,
    }
    if kind is ToolKind.TOOL_SEARCH:
        item["execution"] = "client"
    else:
        item.update(name_fields(call.namespace, call.client_name))
    item["input" if kind is ToolKind.CUSTOM else "arguments"] = value
    return item


class CallReader:
    """Reads calls back against the declared tools, noting every repair in ``conversions``."""

    def __init__(self, tools: UpstreamToolTable, conversions: list[str]) -> None:
        self._tools = tools
        self._conversions = conversions
        self._call_ids: set[str] = set()

    def go_live(self, call: OpenCall, output_index: int, new_id: Callable[..., str]) -> None:
        """Give a named call what its item needs: index, ids, and the tool it restores to."""
        assert call.name is not None
        call.state = LIVE
        call.output_index = output_index
        call.call_id = self._client_call_id(call.upstream_id, new_id)
        call.tool = self._resolve_tool(call.name)
        call.client_name = call.tool.tool_name.name if call.tool is not None else call.name
        call.namespace = call.tool.tool_name.namespace if call.tool is not None else None
        call.item_id = new_id(_ITEM_TYPES.get(call.kind, _FUNCTION_ITEM)[1])

    def _resolve_tool(self, upstream_name: str) -> UpstreamTool | None:
        """The declared tool a call names, by its flat upstream name, else by a guess
        (``ToolIndex.guess``). None: the call names an undeclared tool."""
        tool = self._tools.by_upstream_name(upstream_name)
        if tool is None:
            tool = self._tools.guess(upstream_name)
            if tool is None:
                return None
            self._conversions.append(f"tool name {upstream_name} resolved to {tool.tool_name}")
        if tool.kind is ToolKind.CUSTOM:
            self._conversions.append(f"custom {tool.tool_name.name} restored")
        if tool.tool_name.namespace is not None:
            self._conversions.append(f"namespace {tool.tool_name.namespace} restored")
        return tool

    def _client_call_id(self, upstream_id: str | None, new_id: Callable[..., str]) -> str:
        """The upstream id when it is safe and unused in this response, else a new one."""
        if (
            upstream_id is not None
            and _SAFE_CALL_ID.fullmatch(upstream_id)
            and upstream_id not in self._call_ids
        ):
            call_id = upstream_id
        else:
            if upstream_id is not None:
                self._conversions.append("upstream call id replaced")
            call_id = new_id("call", length=24)
            while call_id in self._call_ids:
                call_id = new_id("call", length=24)
        self._call_ids.add(call_id)
        return call_id

    # ------------------------------------------------------------ what the client gets

    def custom_input(self, call: OpenCall) -> str:
        """A custom tool's raw input: native, or recovered from the function arguments."""
        if call.native_input is not None:
            return "".join(call.native_input)
        spec = call.tool.custom if call.tool is not None else None
        if spec is None:  # a custom kind always has a CustomTool spec
            return call.arguments
        recovered = recover_custom_input(call.arguments, spec)
        if recovered.conversion is not None:
            self._conversions.append(recovered.conversion)
        return recovered.text

    def function_arguments(self, call: OpenCall, status: ItemStatus) -> str:
        """The arguments to give the client.

        Empty becomes ``{}``. Invalid JSON for a ``strict`` tool is repaired (or replaced
        by ``{}``) so that the SDK's ``json.loads`` succeeds, but never for a call the
        upstream cut off: completing a truncated command could make it a valid, wrong one.
        """
        if call.native_input is not None:
            return wrap_raw_input("".join(call.native_input))
        arguments = call.arguments
        if not arguments.strip():
            return "{}"
        spec = call.tool.spec if call.tool is not None else None
        strict = isinstance(spec, FunctionTool) and spec.strict is True
        if not strict or status == "incomplete" or json_or_none(arguments) is not None:
            return arguments
        repaired = repair_json(arguments)
        if repaired is not None:
            self._conversions.append("tool arguments repaired")
            return repaired
        self._conversions.append("tool arguments replaced with {}")
        return "{}"

    def tool_search_arguments(self, call: OpenCall) -> JSON:
        """A tool_search call's arguments as an object (repaired, else ``{}``)."""
        arguments = call.arguments
        value = json_or_none(arguments) if arguments.strip() else {}
        if isinstance(value, dict):
            return value
        repaired = repair_json(arguments)
        value = json_or_none(repaired) if repaired is not None else None
        if isinstance(value, dict):
            self._conversions.append("tool arguments repaired")
            return value
        self._conversions.append("tool arguments replaced with {}")
        return {}
