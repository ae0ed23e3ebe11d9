"""The Chat ``tools`` and ``tool_choice`` of a translated request.

Every callable declared tool becomes a Chat function under its flat upstream name
(``UpstreamToolTable``), as ``.._offer`` shapes it: a function keeps its schema, a
custom (freeform) tool takes one raw string ``input`` and says so in its description, a
client tool_search is a function named ``tool_search``. Hosted tools and a server-run
tool_search are not sent (one warning names them).

What depends on the declared tools alone (``DeclaredTools``: the table, the Chat tools
and their notes) is derived once per tool catalog, which requests declaring the same
tools share. ``tool_choice`` names a declared tool (else a ``RequestError``);
``allowed_tools`` is sent as the subset of tools and its mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import orjson

from toolwire.protocol import ChatTool
from toolwire.tools import ToolCatalog, ToolName

from .._notes import Notes
from .._offer import function_of, offered_tools, read_tool_choice
from .._tools import is_model_callable
from ..tool_table import UpstreamToolTable


@dataclass(frozen=True, slots=True)
class DeclaredTools:
    """What translation derives from the declared tools alone: the upstream tool table,
    the Chat ``tools`` (all of them) and the notes that each of these leaves.

    Kept with the catalog (``ToolCatalog.derived``), which requests that declare the same
    tools share: the table, the Chat tools list and its dicts are only read, and each
    request gets its own copy of the list. ``chat_tools_json`` is the list serialized,
    which a request sending all of it sends as it is (``TranslatedRequest.wire_body``).
    """

    table: UpstreamToolTable
    hosted_notes: Notes
    chat_tools: list[ChatTool]
    chat_tools_notes: Notes
    chat_tools_json: bytes

    @classmethod
    def of(cls, catalog: ToolCatalog) -> DeclaredTools:
        table = UpstreamToolTable(catalog)
        hosted_notes, chat_tools_notes = Notes(), Notes()
        _note_hosted_tools(catalog, hosted_notes)
        chat_tools = chat_tools_for(table, None, chat_tools_notes)
        return cls(table, hosted_notes, chat_tools, chat_tools_notes, orjson.dumps(chat_tools))


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
    for tool in offered_tools(table, allowed, notes):
        function = function_of(tool, notes, custom_as="function", tool_search_as="a function")
        if function is not None:
            tools.append(cast("ChatTool", {"type": "function", "function": function}))
    return tools


# ---------------------------------------------------------------- tool_choice


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """The Chat ``tool_choice`` to send, and the only tools to send (None: all)."""

    value: str | dict[str, Any] | None
    allowed: frozenset[ToolName] | None = None


def resolve_tool_choice(
    choice: str | dict[str, Any] | None, table: UpstreamToolTable
) -> ToolChoice:
    """The Chat form of the client's ``tool_choice``; a ``RequestError`` names what is wrong."""
    chosen = read_tool_choice(choice, table, no_kind="cannot run on a Chat Completions backend")
    if chosen.tool is not None:
        return ToolChoice({"type": "function", "function": {"name": chosen.tool.upstream_name}})
    return ToolChoice(chosen.mode, chosen.allowed)
