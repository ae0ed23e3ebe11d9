"""``ToolName``: a tool's identity, namespace included."""

from __future__ import annotations

from dataclasses import dataclass
from functools import total_ordering


@total_ordering
@dataclass(frozen=True, slots=True)
class ToolName:
    """``(namespace, name)``; the namespace is part of identity.

    ``ToolName("workspace", "search") != ToolName(None, "search")``. An empty namespace
    is no namespace (a call item may carry ``"namespace": ""``), so ``ToolName("", x)``
    is ``ToolName(None, x)``. A flat string form exists only at the edges that need one
    (``str()`` for messages, the translator's upstream names). Names sort plain names
    first, then by namespace and name.
    """

    namespace: str | None
    name: str

    def __post_init__(self) -> None:
        if self.namespace == "":
            object.__setattr__(self, "namespace", None)

    @classmethod
    def plain(cls, name: str) -> ToolName:
        return cls(None, name)

    def __str__(self) -> str:
        return self.name if self.namespace is None else f"{self.namespace}.{self.name}"

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, ToolName):
            return NotImplemented
        return self._sort_key() < other._sort_key()

    def _sort_key(self) -> tuple[bool, str, str]:
        return (self.namespace is not None, self.namespace or "", self.name)
