"""The Chat ``tools`` and ``tool_choice`` of a translated request.

Every callable declared tool becomes a Chat function under its flat upstream name
(``UpstreamToolTable``): a function keeps its schema, a custom (freeform) tool takes one
raw string ``input`` and says so in its description, a client tool_search is a function
named ``tool_search``; a namespace's description goes in front of its tools'. Hosted
tools and a server-run tool_search are not sent (one warning names them).

What depends on the declared tools alone (``DeclaredTools``: the table, the Chat tools
and their notes) is derived once per tool catalog, which requests declaring the same
tools share. ``tool_choice`` names a declared tool (else a ``RequestError``);
``allowed_tools`` is sent as the subset of tools and its mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolwire.errors import RequestError
from toolwire.protocol import ChatTool, CustomTool, FunctionTool, ToolSearchTool
from toolwire.tools import ToolCatalog, ToolName

from .._notes import Notes
from .._tools import (
    custom_tool_description,
    is_model_callable,
    join_paragraphs,
    raw_input_parameters,
)
from ..tool_table import UpstreamTool, UpstreamToolTable


@dataclass(frozen=True, slots=True)
class DeclaredTools:
    """What translation derives from the declared tools alone: the upstream tool table,
    the Chat ``tools`` (all of them) and the notes that each of these leaves.

    Kept with the catalog (``ToolCatalog.derived``), which requests that declare the same
    tools share: the table, the Chat tools list and its dicts are only read, and each
    request gets its own copy of the list.
    """

    table: UpstreamToolTable
    hosted_notes: Notes
    chat_tools: list[ChatTool]
    chat_tools_notes: Notes

    @classmethod
    def of(cls, catalog: ToolCatalog) -> DeclaredTools:
        table = UpstreamToolTable(catalog)
        hosted_notes, chat_tools_notes = Notes(), Notes()
        _note_hosted_tools(catalog, hosted_notes)
        chat_tools = chat_tools_for(table, None, chat_tools_notes)
        return cls(table, hosted_notes, chat_tools, chat_tools_notes)


def _note_hosted_tools(catalog: ToolCatalog, notes: Notes) -> None:
    """One warning naming the declared tools no Chat backend can run."""
    hosted = [str(entry.tool_name) for entry in catalog if not is_model_callable(entry)]
    if hosted:
        notes.warn(
            f"hosted tools not sent (a Chat Completions backend cannot run them): {', '.join(hosted)}"
        )


def chat_tools_for(
    table: UpstreamToolTable,
    allowed: frozenset[ToolName] | None,
    notes: Notes,
) -> list[ChatTool]:
    """The Chat ``tools`` for every callable tool in ``table`` (only ``allowed`` ones if set)."""
    tools: list[ChatTool] = []
    for tool in table:
        if allowed is not None and tool.tool_name not in allowed:
            continue
        if tool.tool_name.namespace is not None:
            notes.convert("namespace tools flattened")
        chat_tool = _chat_tool(tool, tool.namespace_description or "", notes)
        if chat_tool is not None:
            tools.append(chat_tool)
    if allowed is not None:
        notes.convert("allowed_tools sent as the subset of tools")
    return tools


def _chat_tool(tool: UpstreamTool, namespace_description: str, notes: Notes) -> ChatTool | None:
    spec = tool.spec
    if isinstance(spec, FunctionTool):
        chat_tool = _function(tool.upstream_name, spec.parameters, namespace_description, spec.description)
        if spec.strict is not None:
            chat_tool["function"]["strict"] = spec.strict
        return chat_tool
    if isinstance(spec, CustomTool):
        notes.convert(f"custom tool {tool.tool_name} wrapped as function")
        return {
            "type": "function",
            "function": {
                "name": tool.upstream_name,
                "description": custom_tool_description(spec, namespace_description),
                "parameters": raw_input_parameters(),
            },
        }
    if isinstance(spec, ToolSearchTool) and spec.execution == "client":
        notes.convert("client tool_search sent as a function")
        return _function(tool.upstream_name, spec.parameters, namespace_description, spec.description)
    return None  # a server-side tool_search: reported with the hosted tools


def _function(
    name: str, parameters: dict[str, Any] | None, *descriptions: str | None
) -> ChatTool:
    """A Chat function with these parameters (none: an empty object) and descriptions."""
    chat_tool: ChatTool = {
        "type": "function",
        "function": {
            "name": name,
            "parameters": parameters if parameters is not None else {"type": "object", "properties": {}},
        },
    }
    description = join_paragraphs(*descriptions)
    if description:
        chat_tool["function"]["description"] = description
    return chat_tool


# ---------------------------------------------------------------- tool_choice

_MODES = frozenset({"auto", "none", "required"})


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """The Chat ``tool_choice`` to send, and the only tools to send (None: all)."""

    value: str | dict[str, Any] | None
    allowed: frozenset[ToolName] | None = None


def resolve_tool_choice(
    choice: str | dict[str, Any] | None, table: UpstreamToolTable
) -> ToolChoice:
    """The Chat form of the client's ``tool_choice``; a ``RequestError`` names what is wrong."""
    if choice is None:
        return ToolChoice(None)
    if isinstance(choice, str):
        if choice in _MODES:
            return ToolChoice(choice)
        raise RequestError(
            f"Invalid 'tool_choice': {choice!r} is not 'auto', 'none', 'required' or a tool.",
            param="tool_choice",
        )
    kind = choice.get("type")
    if kind in ("function", "custom"):
        tool = _declared_tool(choice, table, "tool_choice")
        return ToolChoice({"type": "function", "function": {"name": tool.upstream_name}})
    if kind == "allowed_tools":
        return _allowed_tools(choice, table)
    raise RequestError(
        f"Invalid 'tool_choice': {kind!r} tools cannot run on a Chat Completions backend.",
        param="tool_choice",
    )


def _allowed_tools(choice: dict[str, Any], table: UpstreamToolTable) -> ToolChoice:
    mode = choice.get("mode", "auto")
    if mode not in _MODES:
        raise RequestError(
            f"Invalid 'tool_choice.mode': {mode!r} is not 'auto', 'none' or 'required'.",
            param="tool_choice.mode",
        )
    entries = choice.get("tools")
    if not isinstance(entries, list):
        raise RequestError(
            "Invalid 'tool_choice.tools': expected a list of tools.", param="tool_choice.tools"
        )
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
        # hosted tools are never sent, so allowing them changes nothing
    return ToolChoice(mode, frozenset(allowed))


def _declared_tool(entry: dict[str, Any], table: UpstreamToolTable, where: str) -> UpstreamTool:
    name, namespace = entry.get("name"), entry.get("namespace")
    if not isinstance(name, str) or not (namespace is None or isinstance(namespace, str)):
        raise RequestError(f"Invalid '{where}': a tool needs a string 'name'.", param=where)
    tool = table.by_tool_name(ToolName(namespace, name))
    if tool is None:
        raise RequestError(
            f"Invalid '{where}': the request declares no tool named {ToolName(namespace, name)}.",
            param=where,
        )
    return tool

