"""``ToolCatalog``: every tool a request declares, wherever it declares it.

Tools come from the top-level ``tools``, from each ``additional_tools`` input item
(Codex's V2 protocol), and from ``tools`` attached to any other input item (e.g. the
tools a ``tool_search_output`` loaded). Namespaces are resolved at any depth: a tool
inside ``{"type": "namespace", "name": "collaboration"}`` is
``ToolName("collaboration", name)``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from toolwire.protocol import (
    AdditionalToolsItem,
    CustomTool,
    FunctionTool,
    NamespaceTool,
    ResponsesRequest,
    ToolSearchOutputItem,
    ToolSearchTool,
    ToolSpec,
    parse_request,
)
from toolwire.protocol._errors import request_error_from

from ._errors import ConfigurationError
from ._names import ToolName
from ._payloads import ToolKind

_TOOLS_ADAPTER: TypeAdapter[list[ToolSpec]] = TypeAdapter(list[ToolSpec])


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One declared tool: its identity, kind, original spec and where it was declared."""

    tool_name: ToolName
    kind: ToolKind
    spec: ToolSpec
    source: str
    namespace_description: str | None = None


def kind_of(spec: ToolSpec) -> ToolKind:
    """The kind of a (non-namespace) tool spec, which is the payload kind its calls carry."""
    if isinstance(spec, FunctionTool):
        return ToolKind.FUNCTION
    if isinstance(spec, CustomTool):
        return ToolKind.CUSTOM
    if isinstance(spec, ToolSearchTool):
        return ToolKind.TOOL_SEARCH
    return ToolKind.HOSTED


def name_of(spec: ToolSpec, namespace: str | None) -> ToolName:
    """The identity of a non-namespace spec declared inside ``namespace``."""
    if isinstance(spec, FunctionTool | CustomTool):
        return ToolName(namespace, spec.name)
    return ToolName(namespace, spec.type)


class ToolCatalog:
    """A read-only map ``ToolName -> CatalogEntry``, in declaration order."""

    def __init__(self, entries: Mapping[ToolName, CatalogEntry] | None = None) -> None:
        self._entries: dict[ToolName, CatalogEntry] = dict(entries or {})

    @classmethod
    def from_request(cls, body: ResponsesRequest | Mapping[str, Any] | bytes) -> ToolCatalog:
        """Gather every tool ``body`` declares.

        Raises ``ConfigurationError`` when two different tools share one ToolName (the
        same definition declared twice counts once).
        """
        request = body if isinstance(body, ResponsesRequest) else parse_request(_as_body(body))
        catalog = cls()
        for index, spec in enumerate(request.tools or ()):
            catalog._add(spec, None, f"tools[{index}]")
        if isinstance(request.input, list):
            for item_index, item in enumerate(request.input):
                for tool_index, spec in enumerate(_attached_tools(item, item_index)):
                    catalog._add(spec, None, f"input[{item_index}].tools[{tool_index}]")
        return catalog

    def get(self, tool_name: ToolName) -> CatalogEntry | None:
        return self._entries.get(tool_name)

    def __contains__(self, tool_name: object) -> bool:
        return tool_name in self._entries

    def __iter__(self) -> Iterator[CatalogEntry]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def _add(
        self, spec: ToolSpec, namespace: str | None, source: str, namespace_description: str | None = None
    ) -> None:
        if isinstance(spec, NamespaceTool):
            for index, inner in enumerate(spec.tools):
                self._add(inner, spec.name, f"{source}.tools[{index}]", spec.description)
            return
        tool_name = name_of(spec, namespace)
        known = self._entries.get(tool_name)
        if known is not None:
            if known.spec.dump() == spec.dump():
                return
            raise ConfigurationError(
                f"Two different tools are named {tool_name}: at {known.source} and at {source}."
            )
        self._entries[tool_name] = CatalogEntry(tool_name, kind_of(spec), spec, source, namespace_description)


def _as_body(body: Mapping[str, Any] | bytes) -> bytes | dict[str, Any]:
    return body if isinstance(body, bytes) else dict(body)


def _attached_tools(item: Any, item_index: int) -> list[ToolSpec]:
    """The tool specs an input item carries in its ``tools`` field, if any.

    ``additional_tools`` and ``tool_search_output`` items hold typed specs already; any
    other item (an unknown type, or a known one with an extra ``tools`` field) holds raw
    JSON, decoded here.
    """
    if isinstance(item, AdditionalToolsItem | ToolSearchOutputItem):
        return list(item.tools)
    extra = item.model_extra  # a plain dict lookup: getattr on a pydantic model is slow
    tools = extra.get("tools") if extra else None
    if not isinstance(tools, list):
        return []
    try:
        return _TOOLS_ADAPTER.validate_python(tools)
    except ValidationError as exc:
        raise request_error_from(exc, prefix=f"input[{item_index}].tools") from exc
