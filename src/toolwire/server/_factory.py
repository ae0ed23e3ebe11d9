"""Build the app from a configuration carried in the environment.

``toolwire serve`` starts uvicorn with this factory so that every worker process
(``--workers N``) builds the same app. Only the *names* of the variables holding keys
travel in the configuration; the keys themselves are read here, in each worker.
"""

from __future__ import annotations

import os

from starlette.types import ASGIApp

from toolwire.config import GatewayConfig
from toolwire.store import open_store

from ._app import create_app
from ._auth import parse_client_keys
from ._observability import observability
from ._routing import build_router
from ._settings import GatewaySettings

CONFIG_ENV = "TOOLWIRE_SERVE_CONFIG"
MODEL_OVERRIDE_ENV = "TOOLWIRE_SERVE_MODEL"


def build_app(config: GatewayConfig, *, model_override: str | None = None) -> ASGIApp:
    server = config.server
    client_keys = parse_client_keys(os.environ.get(server.api_key_env, "")) if server.api_key_env else ()
    store = (
        None
        if server.store == "none"
        else open_store(server.store, ttl_seconds=server.store_ttl_seconds, max_entries=server.store_max_entries)
    )
    observed = observability(config, client_keys=client_keys)
    settings = GatewaySettings(
        max_body_bytes=server.max_body_bytes,
        client_keys=client_keys,
        store=store,
        redact=observed.redactor.redact_json,
    )
    return create_app(
        build_router(config, default_model=model_override), settings, observed.observers, routes=observed.routes
    )


def app_from_env() -> ASGIApp:
    """The uvicorn factory: ``uvicorn --factory toolwire.server._factory:app_from_env``."""
    config = GatewayConfig.model_validate_json(os.environ[CONFIG_ENV])
    return build_app(config, model_override=os.environ.get(MODEL_OVERRIDE_ENV) or None)
