"""The ``tools`` and ``tool_choice`` of a Messages request.

Every callable declared tool becomes a client tool ``{name, description, input_schema}``
under its flat upstream name (``UpstreamToolTable``: ``^[a-zA-Z0-9_-]{1,64}$``, restored
on the way back): the function a Chat backend is offered (``.._offer``: a function keeps
its schema, a custom (freeform) tool takes one raw string ``input`` and says so in its
description, a client tool_search is a tool named ``tool_search``), its parameters as
``input_schema``. Codex's hosted
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

from toolwire.protocol import HostedTool
from toolwire.tools import ToolCatalog, ToolName

from .._notes import Notes
from .._offer import function_of, offered_tools, read_tool_choice
from .._tools import is_model_callable
from ..tool_table import UpstreamToolTable
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
    for tool in offered_tools(declared.table, allowed, notes):
        function = function_of(tool, notes, custom_as="a tool with one string input", tool_search_as="a tool")
        if function is not None:
            tools.append(_client_tool(function))
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


def _client_tool(function: JSON) -> JSON:
    """A client tool: the function's fields, its ``parameters`` as ``input_schema`` (which
    must be an object schema: anything else is an empty object), no ``strict``."""
    tool: JSON = {}
    for key, value in function.items():
        if key == "parameters":
            tool["input_schema"] = value if value and value.get("type") == "object" else _EMPTY_SCHEMA
        elif key != "strict":
            tool[key] = value
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
    chosen = read_tool_choice(choice, table, no_kind="cannot be chosen on a Messages backend")
    if chosen.tool is not None:
        return ToolChoice({"type": "tool", "name": chosen.tool.upstream_name})
    return ToolChoice({"type": _MODES[chosen.mode]} if chosen.mode is not None else None, chosen.allowed)
