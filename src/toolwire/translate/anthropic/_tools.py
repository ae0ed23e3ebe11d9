"""The ``tools`` and ``tool_choice`` of a Messages request.

Every callable declared tool becomes a client tool ``{name, description, input_schema}``
under its flat upstream name (``UpstreamToolTable``: ``^[a-zA-Z0-9_-]{1,64}$``, restored
on the way back): a function keeps its schema, a custom (freeform) tool takes one raw
string ``input`` and says so in its description, a client tool_search is a tool named
``tool_search``; a namespace's description goes in front of its tools'. Codex's hosted
``web_search`` becomes Anthropic's server tool ``web_search_20250305`` where the
profile says the backend runs it, unless the client asked for no live web access
(``external_web_access: false``, Codex's cached mode: Anthropic's search is live); other
hosted tools are not sent (one warning names them).

A request that declares no tools but whose history calls some (the summary request of
a compaction, which offers none) declares those the history calls, each with an empty
schema, and ``tool_choice`` ``none`` (``called_tools``): the API refuses ``tool_use`` and
``tool_result`` blocks in a request without tools, and ``none`` lets the model call none.

``tool_choice`` maps ``auto`` / ``required`` (``any``) / ``none`` / a named tool
(``tool``); ``allowed_tools`` sends the subset; ``parallel_tool_calls: false`` is
``disable_parallel_tool_use``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolwire.errors import RequestError
from toolwire.protocol import CustomTool, FunctionTool, HostedTool, ToolSearchTool
from toolwire.tools import ToolCatalog, ToolName

from .._notes import Notes
from .._tools import (
    custom_tool_description,
    is_model_callable,
    join_paragraphs,
    raw_input_parameters,
)
from ..tool_table import UpstreamTool, UpstreamToolTable
from .profile import MessagesProfile

JSON = dict[str, Any]
WEB_SEARCH_TOOL = "web_search_20250305"
_EMPTY_SCHEMA: JSON = {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True)
class DeclaredTools:
    """The declared tools for a Messages backend: the table, and whether a hosted
    web search is among them."""

    table: UpstreamToolTable
    hosted: tuple[str, ...]
    web_search: HostedTool | None

    @classmethod
    def of(cls, catalog: ToolCatalog) -> DeclaredTools:
        hosted = tuple(str(entry.tool_name) for entry in catalog if not is_model_callable(entry))
        web_search = next(
            (
                entry.spec
                for entry in catalog
                if isinstance(entry.spec, HostedTool) and entry.spec.type.startswith("web_search")
            ),
            None,
        )
        return cls(UpstreamToolTable(catalog), hosted, web_search)


def messages_tools(
    declared: DeclaredTools,
    allowed: frozenset[ToolName] | None,
    profile: MessagesProfile,
    notes: Notes,
) -> list[JSON]:
    """The client tools (only ``allowed`` ones if set), then the web search server tool."""
    tools: list[JSON] = []
    for tool in declared.table:
        if allowed is not None and tool.tool_name not in allowed:
            continue
        if tool.tool_name.namespace is not None:
            notes.convert("namespace tools flattened")
        spec = _client_tool(tool, notes)
        if spec is not None:
            tools.append(spec)
    if allowed is not None:
        notes.convert("allowed_tools sent as the subset of tools")
    search = declared.web_search
    said = False  # the search is offered, or a warning of its own says why not
    if search is not None and profile.web_search and allowed is None:
        said = True
        if (search.model_extra or {}).get("external_web_access") is False:
            notes.warn(
                "web_search not sent: the client asked for no live web access "
                "(external_web_access: false), and this backend searches live"
            )
        else:
            tools.append({"type": WEB_SEARCH_TOOL, "name": "web_search"})
            notes.convert("web_search sent as the backend's web_search server tool")
    unsent = [name for name in declared.hosted if not (said and search is not None and name == search.type)]
    if unsent:
        notes.warn(f"hosted tools not sent (this backend cannot run them): {', '.join(unsent)}")
    return tools


def _client_tool(tool: UpstreamTool, notes: Notes) -> JSON | None:
    spec, namespace_description = tool.spec, tool.namespace_description or ""
    if isinstance(spec, FunctionTool):
        return _tool(tool.upstream_name, spec.parameters, namespace_description, spec.description)
    if isinstance(spec, CustomTool):
        notes.convert(f"custom tool {tool.tool_name} wrapped as a tool with one string input")
        return {
            "name": tool.upstream_name,
            "description": custom_tool_description(spec, namespace_description),
            "input_schema": raw_input_parameters(),
        }
    if isinstance(spec, ToolSearchTool) and spec.execution == "client":
        notes.convert("client tool_search sent as a tool")
        return _tool(tool.upstream_name, spec.parameters, namespace_description, spec.description)
    return None


def _tool(name: str, schema: JSON | None, *descriptions: str | None) -> JSON:
    """A client tool; ``input_schema`` must be an object schema (none: an empty object)."""
    input_schema = schema if schema and schema.get("type") == "object" else _EMPTY_SCHEMA
    tool: JSON = {"name": name, "input_schema": input_schema}
    description = join_paragraphs(*descriptions)
    if description:
        tool["description"] = description
    return tool


def called_tools(messages: list[JSON]) -> list[JSON]:
    """A declaration of each tool the ``tool_use`` blocks of ``messages`` call, in order
    of first call: for a request that declares no tools (the API refuses ``tool_use`` and
    ``tool_result`` blocks then), sent with ``tool_choice`` ``none``."""
    names = dict.fromkeys(
        block["name"]
        for message in messages
        if message["role"] == "assistant"
        for block in message["content"]
        if block["type"] == "tool_use"
    )
    return [{"name": name, "description": _CALLED_EARLIER, "input_schema": _EMPTY_SCHEMA} for name in names]


_CALLED_EARLIER = "A tool called earlier in this conversation, not available now."


# ---------------------------------------------------------------- tool_choice

_MODES = {"auto": "auto", "required": "any", "none": "none"}


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """The Messages ``tool_choice`` (None: not sent), and the only tools to send (None: all)."""

    value: JSON | None
    allowed: frozenset[ToolName] | None = None

    @property
    def forces_a_tool(self) -> bool:
        return self.value is not None and self.value["type"] in ("any", "tool")


def resolve_tool_choice(choice: str | JSON | None, table: UpstreamToolTable) -> ToolChoice:
    """The Messages form of the client's ``tool_choice``; a ``RequestError`` names what is wrong."""
    if choice is None:
        return ToolChoice(None)
    if isinstance(choice, str):
        if choice in _MODES:
            return ToolChoice({"type": _MODES[choice]})
        raise RequestError(
            f"Invalid 'tool_choice': {choice!r} is not 'auto', 'none', 'required' or a tool.", param="tool_choice"
        )
    kind = choice.get("type")
    if kind in ("function", "custom"):
        return ToolChoice({"type": "tool", "name": _declared_tool(choice, table, "tool_choice").upstream_name})
    if kind == "allowed_tools":
        return _allowed_tools(choice, table)
    raise RequestError(
        f"Invalid 'tool_choice': {kind!r} tools cannot be chosen on a Messages backend.", param="tool_choice"
    )


def _allowed_tools(choice: JSON, table: UpstreamToolTable) -> ToolChoice:
    mode = choice.get("mode", "auto")
    if mode not in _MODES:
        raise RequestError(
            f"Invalid 'tool_choice.mode': {mode!r} is not 'auto', 'none' or 'required'.", param="tool_choice.mode"
        )
    entries = choice.get("tools")
    if not isinstance(entries, list):
        raise RequestError("Invalid 'tool_choice.tools': expected a list of tools.", param="tool_choice.tools")
    allowed: set[ToolName] = set()
    for index, entry in enumerate(entries):
        where = f"tool_choice.tools[{index}]"
        if not isinstance(entry, dict):
            raise RequestError(f"Invalid '{where}': expected an object.", param=where)
        if entry.get("type") in ("function", "custom"):
            allowed.add(_declared_tool(entry, table, where).tool_name)
        elif entry.get("type") == "tool_search":
            allowed.add(ToolName(None, "tool_search"))
    return ToolChoice({"type": _MODES[mode]}, frozenset(allowed))


def _declared_tool(entry: JSON, table: UpstreamToolTable, where: str) -> UpstreamTool:
    name, namespace = entry.get("name"), entry.get("namespace")
    if not isinstance(name, str) or not (namespace is None or isinstance(namespace, str)):
        raise RequestError(f"Invalid '{where}': a tool needs a string 'name'.", param=where)
    tool = table.by_tool_name(ToolName(namespace, name))
    if tool is None:
        raise RequestError(
            f"Invalid '{where}': the request declares no tool named {ToolName(namespace, name)}.", param=where
        )
    return tool
