"""The client's tools as a backend with flat function tools is offered them, and the
client's ``tool_choice`` read against them: what the Chat and Messages wires share.

* ``request_catalog``: the request's tools, two different tools with one name a
  ``RequestError`` on ``tools``;
* ``offered_tools``: the callable tools of the table (only the allowed ones, if
  ``allowed_tools`` limits them), namespaced ones flattened;
* ``function_of``: a tool as the function it is offered as (Chat's function object:
  ``name``, ``parameters``, ``description``, ``strict``): a function keeps its schema, a
  custom (freeform) tool takes one raw string ``input`` and says so in its description,
  a client tool_search is a function named ``tool_search``; a namespace's description
  goes in front of its tools'. Each wire then writes it its own way;
* ``read_tool_choice``: ``auto`` / ``none`` / ``required``, a declared tool by name, or
  ``allowed_tools`` (a mode and the only tools to send); anything else, or a tool the
  request does not declare, is a ``RequestError`` naming the place.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from toolwire.errors import RequestError
from toolwire.protocol import CustomTool, FunctionTool, ResponsesRequest, ToolSearchTool
from toolwire.tools import ConfigurationError, ToolCatalog, ToolName

from ._notes import Notes
from ._tools import custom_tool_description, join_paragraphs, raw_input_parameters
from .tool_table import UpstreamTool, UpstreamToolTable

JSON = dict[str, Any]
TOOL_CHOICE_MODES = frozenset({"auto", "none", "required"})


def request_catalog(request: ResponsesRequest) -> ToolCatalog:
    """The request's declared tools; two different tools with one name are the client's error."""
    try:
        return ToolCatalog.from_request(request)
    except ConfigurationError as exc:
        raise RequestError(exc.message, param="tools") from exc


def offered_tools(
    table: UpstreamToolTable, allowed: frozenset[ToolName] | None, notes: Notes
) -> Iterator[UpstreamTool]:
    """The tools of ``table`` to offer (only ``allowed`` ones if set), in order."""
    for tool in table:
        if allowed is not None and tool.tool_name not in allowed:
            continue
        if tool.tool_name.namespace is not None:
            notes.convert("namespace tools flattened")
        yield tool
    if allowed is not None:
        notes.convert("allowed_tools sent as the subset of tools")


def function_of(tool: UpstreamTool, notes: Notes, *, custom_as: str, tool_search_as: str) -> JSON | None:
    """The function ``tool`` is offered as; None for a server-run tool_search (reported
    with the hosted tools). ``custom_as`` / ``tool_search_as``: what the wire calls the
    shape a custom tool / a client tool_search is offered in, for the conversion notes."""
    spec, namespace_description = tool.spec, tool.namespace_description or ""
    if isinstance(spec, FunctionTool):
        function = _function(tool.upstream_name, spec.parameters, namespace_description, spec.description)
        if spec.strict is not None:
            function["strict"] = spec.strict
        return function
    if isinstance(spec, CustomTool):
        notes.convert(f"custom tool {tool.tool_name} wrapped as {custom_as}")
        return {
            "name": tool.upstream_name,
            "description": custom_tool_description(spec, namespace_description),
            "parameters": raw_input_parameters(),
        }
    if isinstance(spec, ToolSearchTool) and spec.execution == "client":
        notes.convert(f"client tool_search sent as {tool_search_as}")
        return _function(tool.upstream_name, spec.parameters, namespace_description, spec.description)
    return None


def _function(name: str, parameters: JSON | None, *descriptions: str | None) -> JSON:
    """A function with these parameters (none: an empty object) and descriptions."""
    function: JSON = {
        "name": name,
        "parameters": parameters if parameters is not None else {"type": "object", "properties": {}},
    }
    description = join_paragraphs(*descriptions)
    if description:
        function["description"] = description
    return function


# ---------------------------------------------------------------- tool_choice


@dataclass(slots=True)
class ChosenTools:
    """The client's ``tool_choice``, read: a mode (None: none given, or a named tool), the
    one tool to call, and the only tools to send (None: all)."""

    mode: str | None = None
    tool: UpstreamTool | None = None
    allowed: frozenset[ToolName] | None = None


def read_tool_choice(choice: str | JSON | None, table: UpstreamToolTable, *, no_kind: str) -> ChosenTools:
    """What the client's ``tool_choice`` asks for; a ``RequestError`` names what is wrong
    (``no_kind``: how the wire says a kind of tool cannot be chosen on it)."""
    if choice is None:
        return ChosenTools()
    if isinstance(choice, str):
        if choice in TOOL_CHOICE_MODES:
            return ChosenTools(choice)
        raise RequestError(
            f"Invalid 'tool_choice': {choice!r} is not 'auto', 'none', 'required' or a tool.", param="tool_choice"
        )
    kind = choice.get("type")
    if kind in ("function", "custom"):
        return ChosenTools(tool=_declared_tool(choice, table, "tool_choice"))
    if kind == "allowed_tools":
        return _allowed_tools(choice, table)
    raise RequestError(f"Invalid 'tool_choice': {kind!r} tools {no_kind}.", param="tool_choice")


def _allowed_tools(choice: JSON, table: UpstreamToolTable) -> ChosenTools:
    mode = choice.get("mode", "auto")
    if mode not in TOOL_CHOICE_MODES:
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
        kind = entry.get("type")
        if kind in ("function", "custom"):
            allowed.add(_declared_tool(entry, table, where).tool_name)
        elif kind == "tool_search":
            allowed.add(ToolName(None, "tool_search"))
        # hosted tools are never sent as client tools, so allowing them changes nothing here
    return ChosenTools(mode, allowed=frozenset(allowed))


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
