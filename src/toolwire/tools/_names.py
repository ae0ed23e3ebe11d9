"""``ToolName``: a tool's identity, namespace included."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class ToolName:
    """``(namespace, name)``; the namespace is part of identity.

    ``ToolName("workspace", "search") != ToolName(None, "search")``. A flat string form
    exists only at the edges that need one (``str()`` for messages, the translator's
    upstream names).
    """

    namespace: str | None
    name: str

    @classmethod
    def plain(cls, name: str) -> ToolName:
        return cls(None, name)

    def __str__(self) -> str:
        return self.name if self.namespace is None else f"{self.namespace}.{self.name}"
