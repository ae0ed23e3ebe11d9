"""``ModelRouter``: which backend serves a requested model, and under which name.

Every configured upstream is built once, through the registry of backend kinds
(``toolwire.upstream.KINDS``); a ``Route`` is a backend and the model name to send it.
The router never asks which kind a backend is.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass

from toolwire.config import GatewayConfig
from toolwire.errors import NotFoundError, UpstreamError
from toolwire.upstream import Backend, BackendSetup, UpstreamLimits, backend_kind

from ._limits import count_limit


@dataclass(frozen=True, slots=True)
class Route:
    """Where one request goes: an upstream's backend, and the model name it is sent."""

    upstream_name: str
    backend: Backend
    upstream_model: str


class ModelRouter:
    """Configured models, each on an upstream; an optional default upstream takes the rest."""

    def __init__(
        self,
        backends: Mapping[str, Backend],
        models: Mapping[str, tuple[str, str]],
        default_upstream: str | None = None,
        default_model: str | None = None,
    ) -> None:
        """``backends`` by upstream name; ``models`` maps a client model name to
        ``(upstream name, upstream model)``.

        ``default_model`` (the ``--model`` flag) replaces the model name sent to the
        default upstream.
        """
        self._backends = dict(backends)
        self._models = dict(models)
        self._default = default_upstream
        self._default_model = default_model

    @property
    def model_names(self) -> list[str]:
        return list(self._models)

    @property
    def default_upstream(self) -> str | None:
        return self._default

    def upstream_of(self, model: str) -> str | None:
        entry = self._models.get(model)
        return entry[0] if entry else None

    def resolve(self, model: str) -> Route:
        """The route for ``model``; ``NotFoundError`` (404) names the known models."""
        entry = self._models.get(model)
        if entry is not None:
            upstream, upstream_model = entry
        elif self._default is not None:
            upstream, upstream_model = self._default, self._default_model or model
        else:
            known = ", ".join(self._models) or "none"
            raise NotFoundError(
                f"The model '{model}' does not exist on this gateway. Known models: {known}.",
                param="model",
                code="model_not_found",
            )
        return Route(upstream, self._backends[upstream], upstream_model)

    async def check(self) -> None:
        """Raise ``UpstreamError`` if any upstream is unreachable."""
        await asyncio.gather(*(backend.check() for backend in self._backends.values()))

    async def troubles(self) -> dict[str, UpstreamError | str]:
        """What may keep each upstream from serving now, by name (empty: nothing): the
        ``UpstreamError`` of one that does not answer its check, or what the answer of one
        that does says (``Backend.check``: a key it refuses, an address not the API's).
        The upstreams are asked together."""

        async def trouble(name: str) -> tuple[str, UpstreamError | str | None]:
            try:
                return name, await self._backends[name].check()
            except UpstreamError as exc:
                return name, exc

        found = await asyncio.gather(*map(trouble, self._backends))
        return {name: trouble for name, trouble in found if trouble is not None}

    async def aclose(self) -> None:
        await asyncio.gather(*(backend.aclose() for backend in self._backends.values()))


def build_router(
    config: GatewayConfig, *, default_model: str | None = None, environ: Mapping[str, str] | None = None
) -> ModelRouter:
    """Backends for every configured upstream, keys read from the environment now."""
    setup = BackendSetup(config.server, os.environ if environ is None else environ, upstream_limits(config))
    backends = {
        upstream.name: backend_kind(upstream.kind).build(upstream, setup) for upstream in config.upstreams
    }
    models = {m.name: (m.upstream, m.upstream_model or m.name) for m in config.models}
    return ModelRouter(backends, models, config.default_upstream, default_model)


def upstream_limits(config: GatewayConfig) -> UpstreamLimits:
    """The bounds on every upstream answer, each trip counted in the metrics."""
    server = config.server
    return UpstreamLimits(
        max_line_bytes=server.upstream_max_line_bytes,
        max_event_bytes=server.upstream_max_event_bytes,
        max_body_bytes=server.upstream_max_body_bytes,
        max_stream_bytes=server.upstream_max_stream_bytes,
        tripped=count_limit,
    )
