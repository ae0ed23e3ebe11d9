"""The gateway: the transport-free exchange pipeline, its HTTP + SSE transport, the ASGI app.

``create_app`` serves the Responses API from a ``ModelRouter`` (``build_router`` builds
one from the configuration, every upstream through the registry of backend kinds);
``Exchange`` is one request's record as observers see it.
"""

from ._app import create_app
from ._auth import is_loopback, parse_client_keys
from ._exchange import Exchange, ExchangeObserver
from ._routing import ModelRouter, Route, build_router
from ._settings import GatewaySettings

__all__ = [
    "Exchange",
    "ExchangeObserver",
    "GatewaySettings",
    "ModelRouter",
    "Route",
    "build_router",
    "create_app",
    "is_loopback",
    "parse_client_keys",
]
