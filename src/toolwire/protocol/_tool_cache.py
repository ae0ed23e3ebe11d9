"""Validated tool lists, interned: Codex resends the same tools with every turn.

A Codex request declares 10 to 50 tools (9-22 KB of JSON), identical from one turn to
the next. ``TOOL_LISTS`` maps the exact JSON of a raw ``tools`` list to the specs it
validated to, so an identical list is validated once and its spec objects are shared by
every later request that declares it. ``BodyToolLists`` finds the tool lists of a body
and swaps in the kept specs before validation. ``LeastRecentlyUsed`` is the bounded map
behind the cache; ``ToolCatalog.from_request`` keeps the catalogs of kept lists in one
too, and what translation derives from a catalog is kept with the catalog.

Shared specs are read-only: nothing may change a spec that came from a request (nor a
namespace's ``tools``). Only lists that validated are kept, so an invalid list is
validated, and reported, every time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import orjson
from pydantic import TypeAdapter

from ._depth import HEADROOM, json_at_depth
from ._items import ITEM_TYPES_WITH_TOOLS, AdditionalToolsItem, ToolSearchOutputItem
from ._tools import ToolSpec

if TYPE_CHECKING:
    from ._request import ResponsesRequest

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
T = TypeVar("T")


class LeastRecentlyUsed(Generic[K, V]):
    """A map of at most ``max_entries`` values whose weights sum to at most ``max_weight``;
    the least recently used go first. Safe to share between threads."""

    def __init__(self, max_entries: int, max_weight: int | None = None) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, not {max_entries}")
        self.max_entries = max_entries
        self.max_weight = max_weight
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value kept for ``key`` (now the most recently used), or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: K, value: V, weight: int = 0) -> list[V]:
        """Keep ``value`` for ``key``; the values no longer kept: the one it replaces,
        those dropped to make room, or ``value`` itself if heavier than ``max_weight``."""
        if self.max_weight is not None and weight > self.max_weight:
            return [value]
        dropped: list[V] = []
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._weight -= old[1]
                dropped.append(old[0])
            self._entries[key] = (value, weight)
            self._weight += weight
            while len(self._entries) > self.max_entries or (
                self.max_weight is not None and self._weight > self.max_weight
            ):
                _, (oldest, oldest_weight) = self._entries.popitem(last=False)
                self._weight -= oldest_weight
                dropped.append(oldest)
        return dropped

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._weight = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def weight(self) -> int:
        """The sum of the kept values' weights."""
        return self._weight


class ToolListCache:
    """Validated specs by the exact JSON of the raw tool list they came from.

    A list's JSON is its serialization ``depth`` levels down (``json_at_depth``): the
    list wrapped in ``depth`` brackets. The depth is part of the key, so that a list
    never matches another one wrapped in extra brackets (``[[tools]]`` is no tool list).

    A dict keyed by 20 KB of bytes hashes all of them on every lookup; comparing them
    with the kept JSON is several times cheaper. So an entry is found by a probe (depth,
    length, the first and the last few hundred bytes) and then checked against the
    whole. Two lists that share a probe take turns in one entry: a miss, never a mixup.
    """

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self._entries: LeastRecentlyUsed[_Probe, _Kept] = LeastRecentlyUsed(max_entries, max_weight=max_bytes)
        # id of a kept list's first spec -> the list: which specs are kept (``_kept``)
        self._by_first_spec: dict[int, _Kept] = {}

    def get(self, depth: int, json: bytes) -> tuple[ToolSpec, ...] | None:
        """The specs validated from the list whose JSON at ``depth`` is ``json``, if kept."""
        entry = self._entries.get(_probe(depth, json))
        if entry is None or entry[0] != json:
            return None
        return entry[1]

    def put(self, depth: int, json: bytes, specs: Sequence[ToolSpec]) -> None:
        """Keep ``specs``, validated from the list whose JSON at ``depth`` is ``json``."""
        kept: _Kept = (json, tuple(specs), {})
        if kept[1]:
            self._by_first_spec[id(kept[1][0])] = kept
        for dropped in self._entries.put(_probe(depth, json), kept, weight=len(json)):
            if dropped[1] and self._by_first_spec.get(id(dropped[1][0])) is dropped:
                del self._by_first_spec[id(dropped[1][0])]

    def json_size(self, specs: Sequence[ToolSpec]) -> int | None:
        """The length of the JSON of the list whose kept specs are ``specs`` (the very
        objects, in order); None if they are not a kept list."""
        kept = self._kept(specs)
        return None if kept is None else len(kept[0])

    def derived(self, specs: Sequence[ToolSpec], build: Callable[[Sequence[ToolSpec]], T]) -> T:
        """``build(specs)``; when ``specs`` are a kept list's very specs, built once and kept
        with the list. ``build`` must depend on the specs alone, and its result, shared by
        every request declaring the list, must not be changed."""
        kept = self._kept(specs)
        if kept is None:
            return build(specs)
        known = kept[2].get(build)
        if known is None:
            known = kept[2][build] = build(specs)
        return cast("T", known)

    def _kept(self, specs: Sequence[ToolSpec]) -> _Kept | None:
        """The kept list whose specs are ``specs``, the very objects in order, if any."""
        kept = self._by_first_spec.get(id(specs[0])) if specs else None
        if kept is None or len(kept[1]) != len(specs) or any(a is not b for a, b in zip(kept[1], specs, strict=True)):
            return None
        return kept

    def clear(self) -> None:
        self._entries.clear()
        self._by_first_spec.clear()

    def __len__(self) -> int:
        return len(self._entries)


_Kept = tuple[bytes, tuple[ToolSpec, ...], dict[Callable[..., object], object]]
"""A list's JSON, its specs, and what was derived from them (``ToolListCache.derived``)."""
_Probe = tuple[int, int, bytes, bytes]
_PROBE_BYTES = 256


def _probe(depth: int, json: bytes) -> _Probe:
    return depth, len(json), json[:_PROBE_BYTES], json[-_PROBE_BYTES:]


TOOL_LISTS = ToolListCache(max_entries=64, max_bytes=4 * 1024 * 1024)
"""The tool lists of recent requests, each serialized at the depth it has in its body
(``BodyToolLists``): the serialization that checks the list is not nested too deep."""


# The depth of a tools list in a body: inside the body object, or inside the body
# object, its ``input`` list and the item; plus the headroom ``check_depth`` keeps.
_TOP_LEVEL_TOOLS_DEPTH = HEADROOM + 1
_ITEM_TOOLS_DEPTH = HEADROOM + 3


class BodyToolLists:
    """The tool lists of one decoded request body: the top-level ``tools`` and the
    ``tools`` of ``additional_tools`` and ``tool_search_output`` items.

    Serializing each list at its depth in the body, then the rest of the body with the
    lists left out, checks the depth exactly as serializing the whole body does
    (``check_depth``), at about the same cost, and gives each list's JSON, the cache key,
    on the way.

    Only for a body decoded from JSON: a body given as a dict may hold Python values
    that serialize like JSON ones but validate differently (an enum, a datetime).
    """

    def __init__(self, top_level: list[Any] | None, items: dict[int, list[Any]]) -> None:
        self._top_level = top_level
        self._items = items  # input index -> the item's tools
        self._misses: list[tuple[int | None, int, bytes]] = []  # (input index or None, depth, JSON)

    @classmethod
    def find(cls, data: dict[str, Any]) -> BodyToolLists | None:
        """The tool lists of the decoded body ``data``; None when it has none."""
        top_level = data.get("tools")
        items: dict[int, list[Any]] = {}
        input_items = data.get("input")
        if isinstance(input_items, list):
            with_tools = [i for i, item in enumerate(input_items) if isinstance(item, dict) and "tools" in item]
            for index in with_tools:
                item = input_items[index]
                kind, tools = item.get("type"), item["tools"]
                if isinstance(kind, str) and kind in ITEM_TYPES_WITH_TOOLS and isinstance(tools, list):
                    items[index] = tools
        if not isinstance(top_level, list):
            if not items:
                return None
            top_level = None
        return cls(top_level, items)

    def checked_and_reused(self, data: dict[str, Any]) -> dict[str, Any]:
        """Check the depth of ``data``; then a copy of it in which every tool list seen
        before is its list of kept specs (``data`` itself is left as it is).

        Raises ``orjson.JSONEncodeError`` where ``check_depth(data)`` would fail.
        """
        lists: list[tuple[int | None, int, list[Any]]] = []  # (input index or None, depth, list)
        rest = dict(data)
        if self._top_level is not None:
            lists.append((None, _TOP_LEVEL_TOOLS_DEPTH, self._top_level))
            rest["tools"] = None
        if self._items:
            rest["input"] = rest_items = list(data["input"])
            for item_index, tools in self._items.items():
                lists.append((item_index, _ITEM_TOOLS_DEPTH, tools))
                rest_items[item_index] = {**rest_items[item_index], "tools": None}
        *keys, _ = _serialized_at_depths([(tools, depth) for _, depth, tools in lists] + [(rest, HEADROOM)])

        reused = dict(data)
        reused_items: list[Any] | None = None
        for (index, depth, _), key in zip(lists, keys, strict=True):
            known = TOOL_LISTS.get(depth, key)
            if known is None:
                self._misses.append((index, depth, key))
            elif index is None:
                reused["tools"] = list(known)
            else:
                if reused_items is None:
                    reused["input"] = reused_items = list(data["input"])
                reused_items[index] = {**reused_items[index], "tools": list(known)}
        return reused

    def remember(self, request: ResponsesRequest) -> None:
        """Keep the specs of the lists that ``request``, just validated, validated anew."""
        for index, depth, key in self._misses:
            if index is None:
                specs = request.tools
            else:
                item = request.input[index]
                specs = item.tools if isinstance(item, AdditionalToolsItem | ToolSearchOutputItem) else None
            if specs is not None:
                TOOL_LISTS.put(depth, key, specs)


def validate_item_tools(tools: list[Any]) -> list[ToolSpec]:
    """The specs of a raw ``tools`` list that an input item of a parsed request carries.

    Items other than ``additional_tools`` and ``tool_search_output`` keep such a list as
    raw JSON; one seen before gives back its kept specs. Raises ``ValidationError``.
    """
    try:
        key = json_at_depth(tools, _ITEM_TOOLS_DEPTH)
    except orjson.JSONEncodeError:
        return _TOOLS_ADAPTER.validate_python(tools)  # too deep: validated, never kept
    known = TOOL_LISTS.get(_ITEM_TOOLS_DEPTH, key)
    if known is not None:
        return list(known)
    specs = _TOOLS_ADAPTER.validate_python(tools)
    TOOL_LISTS.put(_ITEM_TOOLS_DEPTH, key, specs)
    return specs


_TOOLS_ADAPTER: TypeAdapter[list[ToolSpec]] = TypeAdapter(list[ToolSpec])


def _serialized_at_depths(parts: Sequence[tuple[Any, int]]) -> list[bytes]:
    """``json_at_depth(value, depth)`` for each ``(value, depth)`` (every depth at least
    ``HEADROOM``), sharing one chain of wrapping lists: building one costs ~1 us."""
    slot: list[Any] = [None]
    chain: Any = slot
    for _ in range(HEADROOM - 1):
        chain = [chain]
    serialized = []
    for value, depth in parts:
        for _ in range(depth - HEADROOM):
            value = [value]
        slot[0] = value
        serialized.append(orjson.dumps(chain))
    return serialized
