"""``BackendKind``: what one ``kind = "..."`` of upstream is, as the registry knows it.

A kind is the wire a backend speaks (Chat Completions, Responses, ...): its presets,
the settings only it reads, whether it needs an address, and how a configured upstream
of that kind becomes a ``Backend``. The registry (``upstream/kinds``) lists every kind
once; the configuration validates ``kind``, ``preset`` and the kind's own settings
against it, and routing builds each upstream through it. Nothing else asks which kind
a backend is.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ._base import Backend
from ._limits import UpstreamLimits

if TYPE_CHECKING:
    from toolwire.config import ServerConfig, UpstreamConfig


@dataclass(frozen=True, slots=True)
class BackendSetup:
    """What building a backend reads besides its own ``[[upstreams]]`` entry."""

    server: ServerConfig
    environ: Mapping[str, str]
    limits: UpstreamLimits = field(default_factory=UpstreamLimits)
    """What one answer may make the gateway hold (``UpstreamLimits``), and how a trip is counted."""


@dataclass(frozen=True, slots=True)
class BackendKind:
    """One kind of upstream: its name, its presets, its own settings, and its builder."""

    name: str
    build: Callable[[UpstreamConfig, BackendSetup], Backend] = field(repr=False)
    presets: Collection[str] = ("generic",)
    # UpstreamConfig fields that only this kind reads (e.g. a Responses server's capabilities).
    settings: Collection[str] = ()
    needs_base_url: bool = True
    description: str = ""
