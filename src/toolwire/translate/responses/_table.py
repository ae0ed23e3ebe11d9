"""``DowngradedToolTable``: the callable tools of one request, by the name a Responses
backend calls them, and back.

A backend without namespaces gets every tool under its flat name (``UpstreamToolTable``'s,
``collaboration__list_agents``); a tool whose kind the backend lacks is ``lowered`` (a
custom tool or a client tool_search offered as a function). ``without`` is the one
helper both directions use to drop fields from an item.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolwire.protocol import ToolSpec
from toolwire.tools import ToolCatalog, ToolKind, ToolName

from .._tools import ToolIndex, is_model_callable
from ..tool_table import UpstreamToolTable
from .capabilities import ResponsesCapabilities

__all__ = ["DowngradedTool", "DowngradedToolTable"]

JSON = dict[str, Any]


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


class DowngradedToolTable(ToolIndex[DowngradedTool]):
    """The callable tools of one request, by the name the backend calls them, and back."""

    def __init__(self, catalog: ToolCatalog, capabilities: ResponsesCapabilities) -> None:
        super().__init__()
        self._flat = None if capabilities.supports_namespaces else UpstreamToolTable(catalog)
        self._by_upstream: dict[ToolName, DowngradedTool] = {}
        for entry in catalog:
            if is_model_callable(entry):
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

    def by_upstream(self, upstream: ToolName) -> DowngradedTool | None:
        return self._by_upstream.get(upstream)

    def upstream_name(self, tool_name: ToolName) -> ToolName:
        """What the backend calls ``tool_name``; an undeclared tool (a call in the history)
        gets the same deterministic name it would have had."""
        if self._flat is None:
            return tool_name
        return ToolName(None, self._flat.upstream_name(tool_name))

    def upstream_pair(self, namespace: str | None, name: str) -> tuple[str | None, str]:
        """``upstream_name`` as the (namespace, name) the backend calls the tool by."""
        upstream = self.upstream_name(ToolName(namespace, name))
        return upstream.namespace, upstream.name

    def resolve(self, upstream: ToolName) -> tuple[DowngradedTool | None, bool]:
        """The declared tool a backend's call names, and whether a guess was needed.

        A model sometimes drops the namespace or writes the dotted form
        (``list_agents``, ``collaboration.list_agents``): ``guess``.
        """
        tool = self._by_upstream.get(upstream)
        if tool is not None:
            return tool, False
        if upstream.namespace is not None:
            return None, False
        guessed = self.guess(upstream.name)
        return guessed, guessed is not None


def without(value: JSON, *keys: str) -> JSON:
    """``value`` without ``keys`` (a new dict)."""
    return {key: field for key, field in value.items() if key not in keys}
