"""The per-request map between the client's tools and the names the upstream sees.

Chat Completions backends know only flat function names (``[A-Za-z0-9_-]``, at most
64 characters) and tool-call ids of at most 40 characters. ``UpstreamToolTable`` gives
every declared tool a flat name that is deterministic, valid and collision-free
(``collaboration__list_agents``), and maps a flat name back to the ``ToolName`` and
kind the client declared, so a call can be restored to its original type. The Responses
downgrade flattens namespaces with the same names.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from toolwire.protocol import CustomTool, ToolSpec
from toolwire.tools import CatalogEntry, ToolCatalog, ToolKind, ToolName

from ._tools import ToolIndex, is_model_callable

MAX_NAME_LENGTH = 64
MAX_CALL_ID_LENGTH = 40
_VALID_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_VALID_CALL_ID = re.compile(r"[A-Za-z0-9_-]{1,40}")


@dataclass(frozen=True, slots=True)
class UpstreamTool:
    """A declared tool as the upstream sees it."""

    upstream_name: str
    tool_name: ToolName
    kind: ToolKind
    spec: ToolSpec
    namespace_description: str | None = None

    @property
    def custom(self) -> CustomTool | None:
        return self.spec if isinstance(self.spec, CustomTool) else None


class UpstreamToolTable(ToolIndex[UpstreamTool]):
    """Flat upstream names for the callable tools of one request, and the way back.

    Hosted tools and a server-executed tool_search are not callable through a Chat
    backend and get no entry.
    """

    def __init__(self, catalog: ToolCatalog) -> None:
        super().__init__()
        self._by_upstream: dict[str, UpstreamTool] = {}
        # (namespace, name) -> tool: the lookup of a call in the history, without making a
        # ToolName (whose hash runs in Python) for each one.
        self._by_pair: dict[tuple[str | None, str], UpstreamTool] = {}
        for entry in catalog:
            if is_model_callable(entry):
                self._add(entry)

    def _add(self, entry: CatalogEntry) -> None:
        flat = name = flat_name(entry.tool_name)
        attempt = 0
        while name in self._by_upstream:  # a hashed name may be taken too: salt it until free
            name = _hashed(flat, str(entry.tool_name) + (f"#{attempt}" if attempt else ""))
            attempt += 1
        tool = UpstreamTool(name, entry.tool_name, entry.kind, entry.spec, entry.namespace_description)
        self._by_upstream[name] = tool
        self._by_tool[entry.tool_name] = tool
        self._by_pair[entry.tool_name.namespace, entry.tool_name.name] = tool

    def by_upstream_name(self, upstream_name: str) -> UpstreamTool | None:
        return self._by_upstream.get(upstream_name)

    def upstream_name(self, tool_name: ToolName) -> str:
        """The flat name for ``tool_name``; an undeclared tool (a call in the history)
        gets the same deterministic flat name it would have had."""
        return self.upstream_name_of(tool_name.namespace, tool_name.name)

    def upstream_name_of(self, namespace: str | None, name: str) -> str:
        """``upstream_name(ToolName(namespace, name))``, without making the ToolName
        unless the tool is undeclared."""
        tool = self._by_pair.get((namespace or None, name))
        return tool.upstream_name if tool is not None else flat_name(ToolName(namespace, name))

    def names_agree(self, other: UpstreamToolTable) -> bool:
        """Whether ``upstream_name_of`` gives the same name in both tables, for any tool
        (the names a translated history calls its tools by hold for the other table)."""
        if other is self:
            return True
        mine, theirs = self._by_pair, other._by_pair
        # a tool only one table declares is named by the other as any undeclared one
        return all(
            self.upstream_name_of(*pair) == other.upstream_name_of(*pair) for pair in mine.keys() | theirs.keys()
        )


def flat_name(tool_name: ToolName) -> str:
    """``ToolName("collaboration", "list_agents")`` -> ``collaboration__list_agents``.

    A namespace that already ends in ``__`` (Codex's ``mcp__server__``) is joined as is.
    Invalid characters become ``_``; a name that is too long, or had to change, gets a
    short hash of the original so that two different tools never share a flat name.
    """
    if tool_name.namespace is None:
        joined = tool_name.name
    elif tool_name.namespace.endswith("__"):
        joined = tool_name.namespace + tool_name.name
    else:
        joined = f"{tool_name.namespace}__{tool_name.name}"
    if _VALID_NAME.fullmatch(joined):
        return joined
    return _hashed(_INVALID_NAME_CHARS.sub("_", joined), str(tool_name))


def _hashed(name: str, original: str) -> str:
    digest = hashlib.sha256(original.encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME_LENGTH - 9]}_{digest}"


def upstream_call_id(call_id: str) -> str:
    """The tool-call id to send upstream for a client ``call_id`` (at most 40 safe chars).

    Deterministic, so a call and its output map to the same id in every request.
    """
    if _VALID_CALL_ID.fullmatch(call_id):
        return call_id
    return "call_" + hashlib.sha256(call_id.encode()).hexdigest()[:32]
