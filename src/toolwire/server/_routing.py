"""``ModelRouter``: which backend, preset and upstream model serve a requested model.

A route has a kind: ``Route`` (a Chat Completions backend, translated with its
``BackendProfile``) or ``ResponsesRoute`` (a Responses backend, passed through and
downgraded to its ``ResponsesCapabilities``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Literal, TypeVar

from toolwire.config import GatewayConfig, UpstreamConfig
from toolwire.errors import NotFoundError
from toolwire.translate.profile import PRESETS, BackendProfile
from toolwire.translate.responses_downgrade import ResponsesCapabilities
from toolwire.upstream import (
    ChatBackend,
    HttpChatBackend,
    HttpResponsesBackend,
    MockChatBackend,
    ResponsesBackend,
    RetryPolicy,
    UpstreamLimits,
    proxy_for,
)
from toolwire.upstream._http import HttpBackend

from ._limits import count_limit

HttpBackendT = TypeVar("HttpBackendT", bound=HttpBackend)


@dataclass(frozen=True, slots=True)
class Route:
    """Where one request goes: a Chat Completions backend."""

    upstream_name: str
    backend: ChatBackend
    profile: BackendProfile
    upstream_model: str
    kind: Literal["chat"] = "chat"


@dataclass(frozen=True, slots=True)
class ResponsesRoute:
    """Where one request goes: a Responses backend that understands ``capabilities``."""

    upstream_name: str
    backend: ResponsesBackend
    capabilities: ResponsesCapabilities
    upstream_model: str
    kind: Literal["responses"] = "responses"


ResponsesUpstream = tuple[ResponsesBackend, ResponsesCapabilities]


class ModelRouter:
    """Configured models, each on an upstream; an optional default upstream takes the rest."""

    def __init__(
        self,
        backends: Mapping[str, tuple[ChatBackend, BackendProfile]],
        models: Mapping[str, tuple[str, str]],
        default_upstream: str | None = None,
        default_model: str | None = None,
        *,
        responses_backends: Mapping[str, ResponsesUpstream] | None = None,
    ) -> None:
        """``models`` maps a client model name to ``(upstream name, upstream model)``.

        ``default_model`` (the ``--model`` flag) replaces the model name sent to the
        default upstream. ``responses_backends`` are the upstreams of kind ``responses``;
        upstream names are unique across both maps.
        """
        self._backends = dict(backends)
        self._responses_backends = dict(responses_backends or {})
        self._models = dict(models)
        self._default = default_upstream
        self._default_model = default_model

    @property
    def model_names(self) -> list[str]:
        return list(self._models)

    def upstream_of(self, model: str) -> str | None:
        entry = self._models.get(model)
        return entry[0] if entry else None

    def resolve(self, model: str) -> Route | ResponsesRoute:
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
        if upstream in self._responses_backends:
            responses_backend, capabilities = self._responses_backends[upstream]
            return ResponsesRoute(upstream, responses_backend, capabilities, upstream_model)
        backend, profile = self._backends[upstream]
        return Route(upstream, backend, profile, upstream_model)

    def _all_backends(self) -> list[ChatBackend | ResponsesBackend]:
        return [backend for backend, _ in self._backends.values()] + [
            backend for backend, _ in self._responses_backends.values()
        ]

    async def check(self) -> None:
        """Raise ``UpstreamError`` if any upstream is unreachable."""
        await asyncio.gather(*(backend.check() for backend in self._all_backends()))

    async def aclose(self) -> None:
        await asyncio.gather(*(backend.aclose() for backend in self._all_backends()))


def build_router(config: GatewayConfig, *, default_model: str | None = None) -> ModelRouter:
    """Backends for every configured upstream, keys read from the environment now."""
    backends = {
        upstream.name: (_backend(upstream, config), PRESETS[upstream.preset])
        for upstream in config.upstreams
        if upstream.kind != "responses"
    }
    responses_backends = {
        upstream.name: (_responses_backend(upstream, config), capabilities_of(upstream))
        for upstream in config.upstreams
        if upstream.kind == "responses"
    }
    models = {m.name: (m.upstream, m.upstream_model or m.name) for m in config.models}
    default = next((u.name for u in config.upstreams if u.default), None)
    return ModelRouter(
        backends, models, default, default_model, responses_backends=responses_backends
    )


def _backend(upstream: UpstreamConfig, config: GatewayConfig) -> ChatBackend:
    if upstream.kind == "mock":
        return MockChatBackend()
    return _http_backend(HttpChatBackend, upstream, config)


def _responses_backend(upstream: UpstreamConfig, config: GatewayConfig) -> ResponsesBackend:
    return _http_backend(HttpResponsesBackend, upstream, config)


def _http_backend(kind: type[HttpBackendT], upstream: UpstreamConfig, config: GatewayConfig) -> HttpBackendT:
    """An HTTP backend for ``upstream``, its key and proxy read from the environment now."""
    assert upstream.base_url is not None
    api_key = os.environ.get(upstream.api_key_env) if upstream.api_key_env else None
    return kind(
        upstream.base_url,
        api_key=api_key,
        timeout=config.server.upstream_timeout,
        retry=RetryPolicy(attempts=config.server.upstream_retries),
        proxy=proxy_for(upstream.base_url, os.environ),
        limits=upstream_limits(config),
    )


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


def capabilities_of(upstream: UpstreamConfig) -> ResponsesCapabilities:
    """The ``supports_*`` flags of a ``kind = "responses"`` upstream."""
    return ResponsesCapabilities(
        **{field.name: getattr(upstream, field.name) for field in fields(ResponsesCapabilities)}
    )
