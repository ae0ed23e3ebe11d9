"""``ToolCatalog``: every tool a request declares, wherever it declares it.

Tools come from the top-level ``tools``, from each ``additional_tools`` input item
(Codex's V2 protocol), and from ``tools`` attached to any other input item (e.g. the
tools a ``tool_search_output`` loaded). Namespaces are resolved at any depth: a tool
inside ``{"type": "namespace", "name": "collaboration"}`` is
``ToolName("collaboration", name)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from pydantic import ValidationError

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
from toolwire.protocol._tool_cache import TOOL_LISTS, LeastRecentlyUsed, validate_item_tools

from ._errors import ConfigurationError
from ._names import ToolName
from ._payloads import ToolKind

T = TypeVar("T")


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
    """A read-only map ``ToolName -> CatalogEntry``, in declaration order.

    Requests that declare the same tools share one catalog (``from_request``), and what
    is derived from a catalog alone is kept with it (``derived``).
    """

    def __init__(self, entries: Mapping[ToolName, CatalogEntry] | None = None) -> None:
        self._entries: dict[ToolName, CatalogEntry] = dict(entries or {})
        self._derived: dict[Callable[[ToolCatalog], object], object] = {}

    @classmethod
    def from_request(cls, body: ResponsesRequest | Mapping[str, Any] | bytes) -> ToolCatalog:
        """Gather every tool ``body`` declares.

        Raises ``ConfigurationError`` when two different tools share one ToolName (the
        same definition declared twice counts once).

        A request that declares the very same spec objects, at the same places, as a
        recent one gets that request's catalog: ``parse_request`` shares the specs of a
        tool list it has seen before, and Codex resends its tools with every turn. Only
        catalogs of such kept lists are kept, so they hold no more than those lists.
        """
        request = body if isinstance(body, ResponsesRequest) else parse_request(_as_body(body))
        declared = _declared_tool_lists(request)
        if not declared:
            return cls()
        key = tuple([(item_index, *map(id, specs)) for item_index, specs in declared])
        known = _CATALOGS.get(key)
        if known is not None:
            return known[0]
        catalog = cls()
        for item_index, specs in declared:
            where = "tools" if item_index is None else f"input[{item_index}].tools"
            for index, spec in enumerate(specs):
                catalog._add(spec, None, f"{where}[{index}]")
        sizes = [TOOL_LISTS.json_size(specs) for _, specs in declared]
        if None not in sizes:  # every list is kept, so are its specs: their ids stay theirs
            lists = tuple(tuple(specs) for _, specs in declared)
            _CATALOGS.put(key, (catalog, lists), weight=sum(cast("list[int]", sizes)))
        return catalog

    def derived(self, build: Callable[[ToolCatalog], T]) -> T:
        """``build(self)``, built once for this catalog and kept with it.

        A catalog is shared by the requests that declare the same tools, and so is what
        is derived from it (a translator's tool table, the tools it sends upstream):
        ``build`` must depend on the catalog alone, and its result must not be changed.
        """
        known = self._derived.get(build)
        if known is None:
            known = self._derived[build] = build(self)
        return cast("T", known)

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


_DeclaredToolLists = list[tuple[int | None, list[ToolSpec]]]
"""Each list of specs a request declares: ``None`` for the top-level ``tools``, else the
index of the input item holding it."""

# (item index or None, id of each spec) for each declared list -> its catalog, and the
# lists, held so that the ids in the key stay theirs; weighed by the lists' JSON bytes.
_CATALOGS: LeastRecentlyUsed[
    tuple[tuple[int | None, ...], ...], tuple[ToolCatalog, tuple[tuple[ToolSpec, ...], ...]]
] = LeastRecentlyUsed(max_entries=64, max_weight=4 * 1024 * 1024)


def _declared_tool_lists(request: ResponsesRequest) -> _DeclaredToolLists:
    """The top-level ``tools``, and the specs each input item carries in its ``tools``.

    ``additional_tools`` and ``tool_search_output`` items hold typed specs already; any
    other item (an unknown type, or a known one with an extra ``tools`` field) holds raw
    JSON, decoded here.
    """
    declared: _DeclaredToolLists = []
    if request.tools:
        declared.append((None, request.tools))
    if not isinstance(request.input, list):
        return declared
    for item_index in _items_with_tools(request):
        item = request.input[item_index]
        if type(item) is AdditionalToolsItem or type(item) is ToolSearchOutputItem:
            specs = item.tools
        else:
            specs = _raw_tools(cast("dict[str, Any]", item.__pydantic_extra__)["tools"], item_index)
        if specs:
            declared.append((item_index, specs))
    return declared


_ITEMS_WITH_TOOLS = "items with tools"


def _items_with_tools(request: ResponsesRequest) -> tuple[int, ...]:
    """The indices of the input items that carry a ``tools`` field. Those of a history
    the request continues were found by the request before (``protocol._history``),
    which keeps a long history from being walked again on every turn."""
    items = cast("list[Any]", request.input)
    link = request.history()
    known: tuple[int, ...] | None = None
    if link is not None and link.continues is not None:
        known = link.continues.derived.get(_ITEMS_WITH_TOOLS)
    start = link.known if link is not None and known is not None else 0
    found = [*(known or ()), *(index for index in range(start, len(items)) if _has_tools(items[index]))]
    if link is not None and link.own is not None:
        link.own.derived[_ITEMS_WITH_TOOLS] = tuple(found)
    return tuple(found)


def _has_tools(item: Any) -> bool:
    # The exact classes parsing makes: isinstance on a pydantic model goes through its
    # metaclass (~0.2 us), and this runs for every item of a long history.
    if type(item) is AdditionalToolsItem or type(item) is ToolSearchOutputItem:
        return True
    extra = item.__pydantic_extra__  # a plain dict: getattr on a pydantic model is slow
    return bool(extra) and "tools" in extra


def _raw_tools(tools: Any, item_index: int) -> list[ToolSpec]:
    """The specs of a ``tools`` field kept as raw JSON; no list declares nothing."""
    if not isinstance(tools, list):
        return []
    try:
        return validate_item_tools(tools)
    except ValidationError as exc:
        raise request_error_from(exc, prefix=f"input[{item_index}].tools") from exc
