"""Serve a Responses client through a Responses backend that lacks newer tool features.

A Responses backend (vLLM's or Ollama's own ``/v1/responses``, OpenAI, OpenRouter) may
know only V1 tools: top-level ``function`` tools. ``ResponsesCapabilities`` says what it
does know; ``downgrade_request`` rewrites what it does not, and what the backend answers
is restored to the types the client declared:

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
whose arguments wrap the input, its output a ``function_call_output``). Restoring is
decided by the declared tool's kind, never by the capability alone: a ``function_call``
that names a custom tool always comes back as a ``custom_tool_call``, since Codex
aborts a turn on a call whose payload does not match its tool.

Pure: ``downgrade_request`` is a function, ``ResponsesStreamRestorer`` an incremental
decoder (``feed(event) -> list[event]``, ``finish() -> list[event]``) that renumbers the
events it gives out 0, 1, 2, ... and keeps the terminal event's ``output`` equal to the
restored items.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from toolwire.errors import RequestError
from toolwire.protocol import (
    TERMINAL_EVENT_TYPES,
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
from toolwire.tools import CatalogEntry, ConfigurationError, ToolCatalog, ToolKind, ToolName

from .custom_input import recover_custom_input
from .request import custom_tool_description
from .tool_table import UpstreamToolTable

__all__ = [
    "DowngradedRequest",
    "DowngradedTool",
    "DowngradedToolTable",
    "ResponsesCapabilities",
    "ResponsesStreamRestorer",
    "downgrade_request",
]

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ResponsesCapabilities:
    """What a Responses backend understands beyond V1 function tools. All off is V1 only."""

    supports_additional_tools: bool = False
    supports_custom_tools: bool = False
    supports_namespaces: bool = False
    supports_tool_search: bool = False
    supports_hosted_tools: bool = False

    @classmethod
    def everything(cls) -> ResponsesCapabilities:
        """A backend that takes every request as it is (OpenAI itself): a pure passthrough."""
        return cls(True, True, True, True, True)


# ---------------------------------------------------------------- the tool table


@dataclass(frozen=True, slots=True)
class DowngradedTool:
    """A declared tool as the backend sees it, and as the client declared it."""

    upstream: ToolName
    """The name the backend knows: flat (no namespace) when namespaces are lowered."""
    tool_name: ToolName
    kind: ToolKind
    spec: ToolSpec
    lowered: bool
    """Offered to the backend as a function although declared custom or tool_search."""


class DowngradedToolTable:
    """The callable tools of one request, by the name the backend calls them, and back."""

    def __init__(self, catalog: ToolCatalog, capabilities: ResponsesCapabilities) -> None:
        self._flat = None if capabilities.supports_namespaces else UpstreamToolTable(catalog)
        self._by_upstream: dict[ToolName, DowngradedTool] = {}
        self._by_tool: dict[ToolName, DowngradedTool] = {}
        for entry in catalog:
            if _callable(entry):
                tool = DowngradedTool(
                    self.upstream_name(entry.tool_name),
                    entry.tool_name,
                    entry.kind,
                    entry.spec,
                    lowered=(
                        entry.kind is ToolKind.CUSTOM and not capabilities.supports_custom_tools
                    )
                    or (
                        entry.kind is ToolKind.TOOL_SEARCH and not capabilities.supports_tool_search
                    ),
                )
                self._by_upstream[tool.upstream] = tool
                self._by_tool[entry.tool_name] = tool

    def __iter__(self) -> Iterator[DowngradedTool]:
        return iter(self._by_tool.values())

    def __len__(self) -> int:
        return len(self._by_tool)

    def by_tool_name(self, tool_name: ToolName) -> DowngradedTool | None:
        return self._by_tool.get(tool_name)

    def by_upstream(self, upstream: ToolName) -> DowngradedTool | None:
        return self._by_upstream.get(upstream)

    def upstream_name(self, tool_name: ToolName) -> ToolName:
        """What the backend calls ``tool_name``; an undeclared tool (a call in the history)
        gets the same deterministic name it would have had."""
        if self._flat is None:
            return tool_name
        return ToolName(None, self._flat.upstream_name(tool_name))

    def resolve(self, upstream: ToolName) -> tuple[DowngradedTool | None, bool]:
        """The declared tool a backend's call names, and whether a guess was needed.

        A model sometimes drops the namespace or writes the dotted form
        (``list_agents``, ``collaboration.list_agents``); when exactly one declared tool
        fits, that one is meant.
        """
        tool = self._by_upstream.get(upstream)
        if tool is not None:
            return tool, False
        if upstream.namespace is not None:
            return None, False
        fits = [
            t
            for t in self._by_tool.values()
            if upstream.name in (t.tool_name.name, str(t.tool_name))
        ]
        return (fits[0], True) if len(fits) == 1 else (None, False)


def _callable(entry: CatalogEntry) -> bool:
    if entry.kind is ToolKind.HOSTED:
        return False
    return not (isinstance(entry.spec, ToolSearchTool) and entry.spec.execution != "client")


# ---------------------------------------------------------------- the request


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
    try:
        catalog = ToolCatalog.from_request(request)
    except ConfigurationError as exc:
        raise RequestError(exc.message, param="tools") from exc
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
                        "parameters": _raw_input_parameters(),
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
            description = "\n\n".join(
                text for text in (namespace.description, dumped.get("description")) if text
            )
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
            call = _without(item.dump(), "id", "input", "type")
            call = {"type": "function_call", **call, "arguments": _wrap_input(item.input)}
            return [self._call(call, ToolName(item.namespace, item.name))]
        if isinstance(item, CustomToolCallOutputItem):
            if caps.supports_custom_tools:
                return [item.dump()]
            return [{"type": "function_call_output", **_without(item.dump(), "id", "name", "type")}]
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
        call = _without(call, "namespace")
        call["name"] = upstream.name
        return call

    def _tool_search_call(self, item: ToolSearchCallItem) -> list[JSON]:
        if self._caps.supports_tool_search:
            return [item.dump()]
        if item.execution != "client" or not item.call_id:
            self._dropped["tool_search (server)"] = None
            return []
        self.conversions["tool_search calls sent as function calls"] = None
        arguments = item.arguments
        if not isinstance(arguments, str):
            arguments = orjson.dumps(arguments if arguments is not None else {}).decode()
        call: JSON = {
            "type": "function_call",
            "call_id": item.call_id,
            "name": self._table.upstream_name(ToolName(None, "tool_search")).name,
            "arguments": arguments or "{}",
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
        listing = _loaded_tools_text(item.tools, self._table)
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
        chosen = _without(entry, "namespace")
        chosen["type"] = "function" if tool.lowered else entry["type"]
        chosen["name"] = tool.upstream.name
        if tool.upstream.namespace is not None:
            chosen["namespace"] = tool.upstream.namespace
        return chosen


def _raw_input_parameters() -> JSON:
    """The parameters of a custom tool offered as a function: one raw string, ``input``."""
    return {
        "type": "object",
        "properties": {
            "input": {
                "type": "string",
                "description": "The raw text input: not JSON, not wrapped in markdown code fences.",
            }
        },
        "required": ["input"],
        "additionalProperties": False,
    }


def _loaded_tools_text(specs: list[ToolSpec], table: DowngradedToolTable) -> str:
    """What a tool search loaded, as the text of its output: each tool's upstream name
    and the first line of its description (the tools themselves join ``tools``)."""
    listed: list[JSON] = []
    pending: list[tuple[str | None, ToolSpec]] = [(None, spec) for spec in reversed(specs)]
    while pending:
        namespace, spec = pending.pop()
        if isinstance(spec, NamespaceTool):
            pending.extend((spec.name, inner) for inner in reversed(spec.tools))
        elif isinstance(spec, FunctionTool | CustomTool):
            upstream = table.upstream_name(ToolName(namespace, spec.name))
            entry: JSON = _client_name(upstream)
            if spec.description:
                entry["description"] = spec.description.partition("\n")[0][:200]
            listed.append(entry)
    return orjson.dumps({"loaded_tools": listed}).decode()


def _strip_defer_loading(tool: JSON) -> None:
    """A tool a search loaded, now declared up front: ``defer_loading`` no longer applies."""
    tool.pop("defer_loading", None)
    for inner in tool.get("tools") or ():
        if isinstance(inner, dict):
            _strip_defer_loading(inner)


def _wrap_input(text: str) -> str:
    return orjson.dumps({"input": text}).decode()


def _without(value: JSON, *keys: str) -> JSON:
    return {key: field for key, field in value.items() if key not in keys}


# ---------------------------------------------------------------- the answer


_FUNCTION_ID = re.compile(r"\Afc[_-]")
_UNSAFE_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")


class _ItemRestorer:
    """Restores one output item; deterministic, so ``added`` and ``done`` always agree."""

    def __init__(self, downgraded: DowngradedRequest, conversions: list[str]) -> None:
        self._table = downgraded.tools
        self._conversions = conversions

    def call_tool(self, item: JSON) -> DowngradedTool | None:
        """The declared tool a call item needs restoring to, or None if it is fine as it is."""
        kind, name = item.get("type"), item.get("name")
        if kind not in ("function_call", "custom_tool_call") or not isinstance(name, str):
            return None
        namespace = item.get("namespace")
        upstream = ToolName(namespace if isinstance(namespace, str) else None, name)
        tool, guessed = self._table.resolve(upstream)
        if tool is None:
            return None
        unchanged = tool.tool_name == upstream and not guessed
        if unchanged and (
            (kind == "function_call" and tool.kind is ToolKind.FUNCTION)
            or (kind == "custom_tool_call" and tool.kind is ToolKind.CUSTOM)
        ):
            return None
        return tool

    def restore(self, item: JSON, *, done: bool, record: bool = True) -> JSON:
        tool = self.call_tool(item)
        if tool is None:
            return item
        if record:
            self._note(item, tool, done=done)
        if item.get("type") == "function_call" and tool.kind is ToolKind.CUSTOM:
            return self.custom_call(
                item, tool, self.custom_input(item, tool, record=record and done)
            )
        if item.get("type") == "function_call" and tool.kind is ToolKind.TOOL_SEARCH:
            return self._tool_search_call(item, done=done, record=record)
        renamed: JSON = {}
        for key, value in item.items():
            if key == "name":
                renamed.update(_client_name(tool.tool_name))
            elif key != "namespace":
                renamed[key] = value
        return renamed

    def function_name(self, upstream_name: str) -> str | None:
        """The client's name of the function the backend calls ``upstream_name``, if renamed."""
        tool, _ = self._table.resolve(ToolName(None, upstream_name))
        if (
            tool is None
            or tool.kind is not ToolKind.FUNCTION
            or tool.tool_name.name == upstream_name
        ):
            return None
        return tool.tool_name.name

    def custom_input(self, item: JSON, tool: DowngradedTool, *, record: bool) -> str:
        arguments = item.get("arguments")
        if not isinstance(arguments, str) or not arguments:
            return ""
        spec = tool.spec
        if not isinstance(spec, CustomTool):
            return arguments
        recovered = recover_custom_input(arguments, spec)
        if record and recovered.conversion is not None:
            self._conversions.append(recovered.conversion)
        return recovered.text

    def custom_call(self, item: JSON, tool: DowngradedTool, text: str) -> JSON:
        call: JSON = {"id": _restored_id("ctc", item), "type": "custom_tool_call"}
        if "status" in item:
            call["status"] = item["status"]
        call["call_id"] = item.get("call_id")
        call.update(_client_name(tool.tool_name))
        call["input"] = text
        call.update(_without(item, *_CALL_FIELDS))
        return call

    def _tool_search_call(self, item: JSON, *, done: bool, record: bool) -> JSON:
        arguments: Any = {}
        raw = item.get("arguments")
        if isinstance(raw, str) and raw.strip():
            try:
                arguments = orjson.loads(raw)
            except orjson.JSONDecodeError:
                arguments = {}
            if not isinstance(arguments, dict):
                arguments = {}
                if record and done:
                    self._conversions.append("tool arguments replaced with {}")
        call: JSON = {"id": _restored_id("tsc", item), "type": "tool_search_call"}
        if "status" in item:
            call["status"] = item["status"]
        call["call_id"] = item.get("call_id")
        call["execution"] = "client"
        call["arguments"] = arguments
        call.update(_without(item, *_CALL_FIELDS))
        return call

    def _note(self, item: JSON, tool: DowngradedTool, *, done: bool) -> None:
        if not done:
            return
        if item.get("type") == "function_call" and tool.kind is ToolKind.CUSTOM:
            self._conversions.append(f"custom {tool.tool_name.name} restored")
        elif item.get("type") == "function_call" and tool.kind is ToolKind.TOOL_SEARCH:
            self._conversions.append("tool_search call restored")
        if tool.tool_name.namespace is not None and tool.upstream.namespace is None:
            self._conversions.append(f"namespace {tool.tool_name.namespace} restored")
        elif tool.upstream != ToolName(item.get("namespace") or None, str(item.get("name"))):
            self._conversions.append(f"tool name {item.get('name')} resolved to {tool.tool_name}")


_CALL_FIELDS = ("id", "type", "status", "call_id", "name", "namespace", "arguments", "input")


def _client_name(tool_name: ToolName) -> JSON:
    named: JSON = {"name": tool_name.name}
    if tool_name.namespace is not None:
        named["namespace"] = tool_name.namespace
    return named


def _restored_id(prefix: str, item: JSON) -> str:
    """The id of a restored call: the backend's ``fc_`` id re-prefixed, else one derived
    from it (or from the call id), so that every event of the item agrees."""
    upstream_id = item.get("id")
    if isinstance(upstream_id, str) and upstream_id and not _UNSAFE_ID_CHARS.search(upstream_id):
        if _FUNCTION_ID.match(upstream_id) and len(upstream_id) > 3:
            return f"{prefix}_{upstream_id[3:]}"
        return f"{prefix}_{upstream_id}"
    seed = upstream_id if isinstance(upstream_id, str) and upstream_id else str(item.get("call_id"))
    return f"{prefix}_{hashlib.sha256(seed.encode()).hexdigest()[:32]}"


@dataclass(slots=True)
class _RestoredCall:
    """A call whose events are rewritten: its arguments events become input events."""

    tool: DowngradedTool
    item_id: str
    arguments: list[str] = field(default_factory=list)
    input_sent: bool = False


class ResponsesStreamRestorer:
    """The backend's Responses events in, the events the client should see out.

    ``feed(event)`` takes one parsed event; ``finish()`` is the end of the backend's
    stream; ``fail(message)`` a transport error. Each returns the events to send,
    numbered 0, 1, 2, ... across the stream. Exactly one terminal event ends it (the
    backend's, or ``response.failed`` from ``finish``/``fail`` if it sent none); after
    it every call returns ``[]``.

    Every Response object carries ``response_id`` (the gateway's id: it keeps the
    conversation, so it names the response), ``model`` (the client's name for the
    model) and the client's ``tools`` and ``tool_choice``, not the downgraded ones.
    ``created_at`` is used only when the backend failed before sending a Response.
    """

    def __init__(
        self,
        downgraded: DowngradedRequest,
        *,
        response_id: str,
        created_at: int,
        model: str | None = None,
    ) -> None:
        self.conversions: list[str] = []
        """Every repair applied to the backend's output, e.g. ``custom exec restored``."""
        self._request = downgraded.request
        self._items = _ItemRestorer(downgraded, self.conversions)
        self._response_id = response_id
        self._created_at = created_at
        self._model = model
        self._sequence_number = 0
        self._started = False
        self._snapshot: JSON | None = None
        self._calls: dict[int, _RestoredCall] = {}  # by output_index
        self._done: dict[int, JSON] = {}  # restored done items, by output_index
        self._final: JSON | None = None

    @property
    def finished(self) -> bool:
        return self._final is not None

    @property
    def response(self) -> JSON:
        """The final Response object once finished; before that, the current snapshot."""
        if self._final is not None:
            return self._final
        snapshot = dict(self._snapshot or self._fallback_response())
        snapshot["output"] = [self._done[index] for index in sorted(self._done)]
        return snapshot

    # ------------------------------------------------------------ public API

    def feed(self, event: JSON) -> list[JSON]:
        """The events to send for one backend event."""
        if self._final is not None:
            return []
        kind = event.get("type")
        out: list[JSON]
        if kind in ("response.output_item.added", "response.output_item.done"):
            out = self._on_item(event)
        elif kind in (
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
        ):
            out = self._on_arguments(event)
        elif isinstance(event.get("response"), dict):
            out = [self._on_lifecycle(event)]
        else:
            out = [event]
        return self._numbered(out)

    def start(self) -> list[JSON]:
        """Nothing to send before the backend's own ``response.created``."""
        return []

    def finish(self, *, completed_at: int | None = None, ended_cleanly: bool = True) -> list[JSON]:
        """The backend's stream ended; a stream without a terminal event has failed.

        The arguments are the stream translators' common ones: the backend's own
        terminal event carries its times and says it ended.
        """
        if self._final is not None:
            return []
        return self.fail("The upstream stream closed before a terminal event (response.completed).")

    def fail(self, message: str, *, code: str = "server_error") -> list[JSON]:
        """``error`` then ``response.failed`` with the items done so far."""
        if self._final is not None:
            return []
        events: list[JSON] = []
        if not self._started:
            events.append({"type": "response.created", "response": self._fallback_response()})
        error_type = (
            "invalid_request_error" if code == "context_length_exceeded" else "server_error"
        )
        events.append(
            {
                "type": "error",
                "code": code,
                "message": message,
                "param": None,
                "error": {"type": error_type, "code": code, "message": message, "param": None},
            }
        )
        final = self.response
        final.update(status="failed", error={"code": code, "message": message})
        events.append({"type": "response.failed", "response": final})
        self._started = True
        self._final = final
        return self._numbered(events)

    def restore_response(self, response: JSON) -> JSON:
        """A whole (non-streaming) Response object, restored the same way."""
        restored = self._echo(response)
        output = response.get("output")
        if isinstance(output, list):
            restored["output"] = [
                self._items.restore(item, done=True) if isinstance(item, dict) else item
                for item in output
            ]
        return restored

    # ------------------------------------------------------------ events

    def _on_lifecycle(self, event: JSON) -> JSON:
        """created / in_progress / ... and the terminal events: the Response object restored."""
        self._started = True
        response = self._echo(event["response"])
        output = response.get("output")
        if isinstance(output, list):
            response["output"] = [
                self._items.restore(item, done=True, record=False)
                if isinstance(item, dict)
                else item
                for item in output
            ]
        elif event["type"] in TERMINAL_EVENT_TYPES:
            response["output"] = [self._done[index] for index in sorted(self._done)]
        if event["type"] in TERMINAL_EVENT_TYPES:
            self._final = response
        else:
            self._snapshot = response
        return {**event, "response": response}

    def _on_item(self, event: JSON) -> list[JSON]:
        item = event.get("item")
        index = event.get("output_index")
        if not isinstance(item, dict) or not isinstance(index, int):
            return [event]
        done = event["type"] == "response.output_item.done"
        tool = self._items.call_tool(item)
        restored = self._items.restore(item, done=done)
        events: list[JSON] = []
        if tool is not None and item.get("type") != restored.get("type"):
            # A function call restored to another kind: its arguments events are rewritten.
            call = self._calls.setdefault(index, _RestoredCall(tool, str(restored["id"])))
            if done and restored["type"] == "custom_tool_call" and not call.input_sent:
                events.extend(self._input_events(call, index, str(restored["input"])))
        if done:
            self._done[index] = restored
            self._calls.pop(index, None)
        events.append({**event, "item": restored})
        return events

    def _on_arguments(self, event: JSON) -> list[JSON]:
        index = event.get("output_index")
        call = self._calls.get(index) if isinstance(index, int) else None
        if call is None:
            return [self._renamed_arguments(event)]
        if event["type"] == "response.function_call_arguments.delta":
            delta = event.get("delta")
            if isinstance(delta, str):
                call.arguments.append(delta)
            return []
        if call.tool.kind is not ToolKind.CUSTOM or call.input_sent:
            return []
        arguments = event.get("arguments")
        if not isinstance(arguments, str):
            arguments = "".join(call.arguments)
        text = self._items.custom_input({"arguments": arguments}, call.tool, record=False)
        assert isinstance(index, int)
        return self._input_events(call, index, text)

    def _renamed_arguments(self, event: JSON) -> JSON:
        """``function_call_arguments.done`` may name the function: the client's name."""
        name = event.get("name")
        if event["type"] != "response.function_call_arguments.done" or not isinstance(name, str):
            return event
        client_name = self._items.function_name(name)
        return event if client_name is None else {**event, "name": client_name}

    def _input_events(self, call: _RestoredCall, index: int, text: str) -> list[JSON]:
        call.input_sent = True
        events: list[JSON] = []
        where = {"item_id": call.item_id, "output_index": index}
        if text:
            events.append({"type": "response.custom_tool_call_input.delta", **where, "delta": text})
        events.append({"type": "response.custom_tool_call_input.done", **where, "input": text})
        return events

    # ------------------------------------------------------------ emitting

    def _numbered(self, events: list[JSON]) -> list[JSON]:
        numbered = []
        for event in events:
            numbered.append({**event, "sequence_number": self._sequence_number})
            self._sequence_number += 1
        return numbered

    def _echo(self, response: JSON) -> JSON:
        """The Response object under the gateway's id, repeating the client's request."""
        restored = dict(response)
        restored["id"] = self._response_id
        if "tools" in restored:
            restored["tools"] = [tool.dump() for tool in self._request.tools or ()]
        if "tool_choice" in restored and self._request.tool_choice is not None:
            restored["tool_choice"] = self._request.tool_choice
        if "model" in restored and self._model is not None:
            restored["model"] = self._model
        return restored

    def _fallback_response(self) -> JSON:
        """A Response object for a backend that never sent one."""
        request = self._request
        return {
            "id": self._response_id,
            "object": "response",
            "created_at": self._created_at,
            "status": "in_progress",
            "model": self._model if self._model is not None else request.model,
            "output": [],
            "usage": None,
            "error": None,
            "incomplete_details": None,
            "instructions": request.instructions,
            "metadata": request.metadata if request.metadata is not None else {},
            "parallel_tool_calls": request.parallel_tool_calls is not False,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "tool_choice": request.tool_choice if request.tool_choice is not None else "auto",
            "tools": [tool.dump() for tool in request.tools or ()],
        }
