"""A set and a map that a walk grows on top of what an earlier walk kept, without copying it.

A request that continues a long conversation resumes the walk saved by the request before
it (``_conversation``): the call ids seen, the outputs passed, where each output is. At 800
tool turns each holds 1,600 entries, of which a turn adds two or three; copying them all
for every turn made a turn's cost grow with the history, and the copy reads memory the
caches no longer hold by the next turn (a set of 1,600 call ids: 4 µs to copy hot, 40 µs
cold). So each is a ``base`` that is shared and never changes, and what was ``added``
since, its own: a walk that resumes copies only what was added (``grown``), and a walk
that saves merges that into a new base once it is an eighth of the base (``settled``),
so a turn costs about what it adds, and the merges add a constant share.

Keys are strings, values anything; only what the walk asks is here (``in``, ``add``,
``get``, ``[]``, ``setdefault``), and ``len`` and iteration to look one over. What a save
keeps is read-only, like the rest of a ``SavedWalk``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterator
from typing import Generic, Self, TypeVar

V = TypeVar("V")
B = TypeVar("B", bound=Collection[str])  # the base's type
A = TypeVar("A", bound=Collection[str])  # the additions' type

_MERGE_SHARE = 8  # merge what was added into the base once it is 1/8 of it ...
_MERGE_AT_LEAST = 32  # ... and at least this many entries (a short history merges seldom)


class _Growing(ABC, Generic[B, A]):
    """A shared ``_base`` and what this walk ``_added``: no key is in both."""

    __slots__ = ("_added", "_base")

    _base: B
    _added: A

    def __contains__(self, key: object) -> bool:
        return key in self._added or key in self._base

    def __len__(self) -> int:
        return len(self._base) + len(self._added)

    def __iter__(self) -> Iterator[str]:
        yield from self._base
        yield from self._added

    def settled(self) -> Self:
        """This value to keep, read-only: its additions merged into a new base when due."""
        added = len(self._added)
        if added >= _MERGE_AT_LEAST and added * _MERGE_SHARE >= len(self._base):
            return self._merged()
        return self

    @abstractmethod
    def _merged(self) -> Self:
        """A value whose base holds this one's base and additions."""


class GrowingSet(_Growing[frozenset[str], set[str]]):
    """A set of strings: a shared base, and what this walk added."""

    __slots__ = ()

    def __init__(self, base: frozenset[str] = frozenset(), added: set[str] | None = None) -> None:
        self._base = base
        self._added = set() if added is None else added

    def add(self, value: str) -> None:
        if value not in self._base:
            self._added.add(value)

    def grown(self) -> GrowingSet:
        """A copy to add to: the base shared, what was added copied."""
        return GrowingSet(self._base, set(self._added))

    def _merged(self) -> GrowingSet:
        return GrowingSet(self._base | self._added)


class GrowingMap(_Growing[dict[str, V], dict[str, V]]):
    """A map from strings: a shared base, and what this walk added."""

    __slots__ = ()

    def __init__(self, base: dict[str, V] | None = None, added: dict[str, V] | None = None) -> None:
        self._base = {} if base is None else base
        self._added = {} if added is None else added

    def __getitem__(self, key: str) -> V:
        added = self._added
        return added[key] if key in added else self._base[key]

    def get(self, key: str) -> V | None:
        added = self._added
        return added[key] if key in added else self._base.get(key)

    def setdefault(self, key: str, value: V) -> V:
        """The value of ``key``; ``value``, added, if it has none."""
        base = self._base
        if key in base:
            return base[key]
        return self._added.setdefault(key, value)

    def grown(self) -> GrowingMap[V]:
        """A copy to add to: the base shared, what was added copied."""
        return GrowingMap(self._base, dict(self._added))

    def _merged(self) -> GrowingMap[V]:
        return GrowingMap({**self._base, **self._added})
