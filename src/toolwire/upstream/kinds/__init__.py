"""The registry of backend kinds: every ``kind = "..."`` an upstream can have, once.

Adding a kind is one module here (its ``BackendKind``, building its ``Backend`` on the
wire's pure translation in ``toolwire.translate``) and one entry in ``KINDS``.
"""

from __future__ import annotations

from collections.abc import Mapping

from .._kind import BackendKind
from .anthropic import ANTHROPIC
from .chat import CHAT
from .mock import MOCK
from .responses import RESPONSES

KINDS: Mapping[str, BackendKind] = {kind.name: kind for kind in (CHAT, RESPONSES, ANTHROPIC, MOCK)}


def backend_kind(name: str) -> BackendKind:
    """The kind called ``name``; ``ValueError`` naming the known ones."""
    kind = KINDS.get(name)
    if kind is None:
        raise ValueError(f"unknown kind '{name}' (known: {', '.join(KINDS)})")
    return kind


__all__ = ["KINDS", "backend_kind"]
