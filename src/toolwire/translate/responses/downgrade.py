"""``downgrade_request``: a Responses request for a backend that lacks newer tool features.

``ResponsesCapabilities`` says what the backend knows beyond V1 function tools; what it
does not know is rewritten here, and ``ResponsesStreamRestorer`` restores the answer to
the types the client declared:

=================================  ===========================================  ==============================
the client sends                   the backend gets (capability missing)         the client gets back
=================================  ===========================================  ==============================
``additional_tools`` input item    its tools hoisted into top-level ``tools``    (nothing to restore)
``namespace`` tool                 its tools flattened: ``collaboration__x``     ``namespace`` + ``name``
``custom`` (freeform) tool         a function taking ``{"input": "<raw>"}``      ``custom_tool_call``, raw input
client ``tool_search`` tool        a function named ``tool_search``              ``tool_search_call``
hosted tools (``web_search``)      dropped, with a warning                       --
=================================  ===========================================  ==============================

History items follow the same rules (a ``custom_tool_call`` becomes a ``function_call``
whose arguments wrap the input, its output a ``function_call_output``; a tool search's
output lists what it loaded by the names the backend calls the tools). Fields toolwire
does not touch pass through as the client sent them. Pure: a function of the request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from toolwire.protocol import (
    AdditionalToolsItem,
    CustomTool,
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FunctionCallItem,
    FunctionTool,
    Item,
    NamespaceTool,
    ResponsesRequest,
    ToolSearchCallItem,
    ToolSearchOutputItem,
    ToolSearchTool,
    ToolSpec,
)
from toolwire.tools import ToolName

from .._offer import request_catalog
from .._tools import (
    custom_tool_description,
    join_paragraphs,
    loaded_tools_listing,
    raw_input_parameters,
    tool_search_arguments_text,
    wrap_raw_input,
)
from ._table import DowngradedToolTable, without
from .capabilities import ResponsesCapabilities

__all__ = ["DowngradedRequest", "downgrade_request"]

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class DowngradedRequest:
    """The body to send the backend, and what the restorer needs to undo it.

    ``warnings`` says what could not be sent (hosted tools a backend cannot run);
    ``conversions`` names what was reshaped (short labels, each listed once).
    """

    body: JSON
    tools: DowngradedToolTable
    request: ResponsesRequest
    capabilities: ResponsesCapabilities
    warnings: list[str] = field(default_factory=list)
    conversions: list[str] = field(default_factory=list)


def downgrade_request(
    request: ResponsesRequest, capabilities: ResponsesCapabilities, *, model: str | None = None
) -> DowngradedRequest:
    """``request`` rewritten for a backend with ``capabilities``; ``model`` replaces its model.

    Fields toolwire does not touch pass through as the client sent them. Raises
    ``RequestError`` when two different tools share one name.
    """
    catalog = request_catalog(request)
    table = DowngradedToolTable(catalog, capabilities)
    lowering = _Lowering(table, capabilities)
    body = request.dump()
    if model is not None:
        body["model"] = model
    if isinstance(request.input, list):
        body["input"] = lowering.items(request.input)
    tools = lowering.top_level_tools(request.tools or ())
    if tools or request.tools is not None:
        body["tools"] = tools
    if request.tool_choice is not None:
        body["tool_choice"] = lowering.tool_choice(request.tool_choice)
    return DowngradedRequest(
        body, table, request, capabilities, lowering.warnings(), list(lowering.conversions)
    )


class _Lowering:
    """Rewrites tool specs, input items and tool_choice; collects what it did."""

    def __init__(self, table: DowngradedToolTable, capabilities: ResponsesCapabilities) -> None:
        self._table = table
        self._caps = capabilities
        self._hoisted: list[tuple[ToolSpec, bool]] = []  # (spec, loaded by a tool search)
        self._dropped: dict[str, None] = {}
        self.conversions: dict[str, None] = {}

    def warnings(self) -> list[str]:
        if not self._dropped:
            return []
        return [
            "tools not sent (this Responses backend does not support them): "
            + ", ".join(self._dropped)
        ]

    # -- tools

    def top_level_tools(self, declared: Sequence[ToolSpec]) -> list[JSON]:
        """The client's top-level tools, then the hoisted ones, each upstream name once."""
        tools: list[JSON] = []
        seen: set[tuple[Any, Any]] = set()
        for spec, loaded in [*((spec, False) for spec in declared), *self._hoisted]:
            for lowered in self.spec(spec):
                if loaded:
                    _strip_defer_loading(lowered)
                key = (lowered.get("type"), lowered.get("name"))
                if key[1] is not None and key in seen:
                    continue
                seen.add(key)
                tools.append(lowered)
        return tools

    def spec(self, spec: ToolSpec, namespace: NamespaceTool | None = None) -> list[JSON]:
        """One declared tool as the backend must see it: zero, one or (a namespace) many."""
        caps = self._caps
        if isinstance(spec, NamespaceTool):
            inner = [lowered for tool in spec.tools for lowered in self.spec(tool, spec)]
            if caps.supports_namespaces:
                return [{**spec.dump(), "tools": inner}]
            self.conversions["namespace tools flattened"] = None
            return inner
        if isinstance(spec, FunctionTool):
            return [self._renamed(spec.dump(), spec.name, namespace)]
        if isinstance(spec, CustomTool):
            if caps.supports_custom_tools:
                return [self._renamed(spec.dump(), spec.name, namespace)]
            self.conversions["custom tools sent as functions"] = None
            flattened_from = (
                namespace if namespace is not None and not caps.supports_namespaces else None
            )
            namespace_description = (flattened_from.description or "") if flattened_from else ""
            return [
                self._renamed(
                    {
                        "type": "function",
                        "name": spec.name,
                        "description": custom_tool_description(spec, namespace_description),
                        "parameters": raw_input_parameters(),
                    },
                    spec.name,
                    namespace,
                    describe=False,
                )
            ]
        if isinstance(spec, ToolSearchTool):
            if caps.supports_tool_search:
                return [spec.dump()]
            if spec.execution != "client":
                self._dropped["tool_search (server)"] = None
                return []
            self.conversions["client tool_search sent as a function"] = None
            function: JSON = {"type": "function", "name": "tool_search"}
            if spec.description:
                function["description"] = spec.description
            function["parameters"] = spec.parameters or {"type": "object", "properties": {}}
            return [self._renamed(function, "tool_search", namespace)]
        if caps.supports_hosted_tools:
            return [spec.dump()]
        self._dropped[spec.type] = None
        return []

    def _renamed(
        self, dumped: JSON, name: str, namespace: NamespaceTool | None, *, describe: bool = True
    ) -> JSON:
        """``dumped`` under its upstream name; a flattened tool's description gets its
        namespace's description in front."""
        tool_name = ToolName(namespace.name if namespace else None, name)
        upstream = self._table.upstream_name(tool_name)
        if upstream.name != name:
            dumped["name"] = upstream.name
        if describe and namespace is not None and upstream.namespace is None:
            description = join_paragraphs(namespace.description, dumped.get("description"))
            if description:
                dumped["description"] = description
        return dumped

    # -- input items

    def items(self, items: list[Item]) -> list[JSON]:
        out: list[JSON] = []
        for item in items:
            out.extend(self._item(item))
        return out

    def _item(self, item: Item) -> list[JSON]:
        caps = self._caps
        if isinstance(item, AdditionalToolsItem):
            if caps.supports_additional_tools:
                tools = [lowered for spec in item.tools for lowered in self.spec(spec)]
                return [{**item.dump(), "tools": tools}]
            self._hoisted.extend((spec, False) for spec in item.tools)
            self.conversions["additional_tools hoisted into tools"] = None
            return []
        if isinstance(item, FunctionCallItem):
            return [self._call(item.dump(), ToolName(item.namespace, item.name))]
        if isinstance(item, CustomToolCallItem):
            if caps.supports_custom_tools:
                return [self._call(item.dump(), ToolName(item.namespace, item.name))]
            self.conversions["custom tool calls sent as function calls"] = None
            call = without(item.dump(), "id", "input", "type")
            call = {"type": "function_call", **call, "arguments": wrap_raw_input(item.input)}
            return [self._call(call, ToolName(item.namespace, item.name))]
        if isinstance(item, CustomToolCallOutputItem):
            if caps.supports_custom_tools:
                return [item.dump()]
            return [{"type": "function_call_output", **without(item.dump(), "id", "name", "type")}]
        if isinstance(item, ToolSearchCallItem):
            return self._tool_search_call(item)
        if isinstance(item, ToolSearchOutputItem):
            return self._tool_search_output(item)
        return [item.dump()]

    def _call(self, call: JSON, tool_name: ToolName) -> JSON:
        """A call item under the name the backend knows its tool by."""
        upstream = self._table.upstream_name(tool_name)
        if upstream == tool_name:
            return call
        self.conversions["namespaced calls flattened"] = None
        call = without(call, "namespace")
        call["name"] = upstream.name
        return call

    def _tool_search_call(self, item: ToolSearchCallItem) -> list[JSON]:
        if self._caps.supports_tool_search:
            return [item.dump()]
        if item.execution != "client" or not item.call_id:
            self._dropped["tool_search (server)"] = None
            return []
        self.conversions["tool_search calls sent as function calls"] = None
        call: JSON = {
            "type": "function_call",
            "call_id": item.call_id,
            "name": self._table.upstream_name(ToolName(None, "tool_search")).name,
            "arguments": tool_search_arguments_text(item),
        }
        if item.status is not None:
            call["status"] = item.status
        return [call]

    def _tool_search_output(self, item: ToolSearchOutputItem) -> list[JSON]:
        if self._caps.supports_tool_search:
            tools = [lowered for spec in item.tools for lowered in self.spec(spec)]
            return [{**item.dump(), "tools": tools}]
        self._hoisted.extend((spec, True) for spec in item.tools)
        if item.execution != "client" or not item.call_id:
            return []
        self.conversions["tool_search outputs sent as function_call_output"] = None
        listing = loaded_tools_listing(item.tools, self._table.upstream_pair)
        return [{"type": "function_call_output", "call_id": item.call_id, "output": listing}]

    # -- tool_choice

    def tool_choice(self, choice: str | JSON) -> str | JSON:
        if not isinstance(choice, dict):
            return choice
        kind = choice.get("type")
        if kind in ("function", "custom"):
            return self._chosen(choice)
        if kind == "tool_search" and not self._caps.supports_tool_search:
            return {"type": "function", "name": "tool_search"}
        if kind == "allowed_tools" and isinstance(choice.get("tools"), list):
            allowed = [
                self.tool_choice(entry) if isinstance(entry, dict) else entry
                for entry in choice["tools"]
            ]
            return {**choice, "tools": allowed}
        return choice

    def _chosen(self, entry: JSON) -> JSON:
        name, namespace = entry.get("name"), entry.get("namespace")
        if not isinstance(name, str) or not (namespace is None or isinstance(namespace, str)):
            return entry
        tool = self._table.by_tool_name(ToolName(namespace, name))
        if tool is None:
            return entry
        chosen = without(entry, "namespace")
        chosen["type"] = "function" if tool.lowered else entry["type"]
        chosen["name"] = tool.upstream.name
        if tool.upstream.namespace is not None:
            chosen["namespace"] = tool.upstream.namespace
        return chosen


def _strip_defer_loading(tool: JSON) -> None:
    """A tool a search loaded, now declared up front: ``defer_loading`` no longer applies."""
    tool.pop("defer_loading", None)
    for inner in tool.get("tools") or ():
        if isinstance(inner, dict):
            _strip_defer_loading(inner)
