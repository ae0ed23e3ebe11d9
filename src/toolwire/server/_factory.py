"""Build the app from a configuration carried in the environment.

``toolwire serve`` starts uvicorn with this factory so that every worker process
(``--workers N``) builds the same app. Only the *names* of the variables holding keys
travel in the configuration; the keys themselves are read here, in each worker. Once
the app is built, the process's garbage collector is set for serving
(``settle_garbage_collector``).
"""

from __future__ import annotations

import gc
import os

from toolwire.codex_config import DEFAULT_CONTEXT_WINDOW, CodexModel
from toolwire.compaction import compaction_key_for
from toolwire.config import GatewayConfig
from toolwire.keys import KeyGate, open_key_store
from toolwire.protocol import KNOWN_HISTORIES
from toolwire.store import ResponseStore, open_store

from ._app import create_app
from ._auth import parse_client_keys
from ._capacity import capacity, open_files_limit
from ._history import KnownConversations
from ._routing import build_router
from ._settings import CONFIG_ENV, GatewaySettings, WebSocketSettings
from ._siblings import SocketSiblings, WorkerPlace
from .observe import observability
from .types import ASGIApp

MODEL_OVERRIDE_ENV = "TOOLWIRE_SERVE_MODEL"
YOUNG_GENERATION_THRESHOLD = 10_000
"""Net new container objects before a young collection (CPython's default: 700)."""


def open_configured_store(config: GatewayConfig) -> ResponseStore | None:
    """The response store ``[server]`` names, with its limits (None for ``none``); a
    ``ValueError`` says what is wrong with its URL or limits."""
    server = config.server
    if server.store == "none":
        return None
    return open_store(
        server.store,
        ttl_seconds=server.store_ttl_seconds,
        max_entries=server.store_max_entries,
        max_bytes=server.store_max_bytes,
    )


def build_app(config: GatewayConfig, *, model_override: str | None = None) -> ASGIApp:
    server = config.server
    client_keys = parse_client_keys(os.environ.get(server.api_key_env, "")) if server.api_key_env else ()
    admin_keys = parse_client_keys(os.environ.get(server.admin_key_env, "")) if server.admin_key_env else ()
    store = open_configured_store(config)
    key_store = None if server.store == "none" else open_key_store(server.store)
    gate = (
        KeyGate(key_store, static_keys=client_keys, admin_keys=admin_keys)
        if key_store is not None or client_keys or admin_keys
        else None
    )
    KNOWN_HISTORIES.configure(KNOWN_HISTORIES.max_entries, server.history_cache_bytes)
    conversations = KnownConversations(max_bytes=server.history_cache_bytes)
    place = WorkerPlace.from_environment()
    siblings = SocketSiblings(place) if place is not None else None
    observed = observability(
        config,
        client_keys=client_keys,
        admin_keys=admin_keys,
        requires_key=gate.requires_key if gate else None,
        conversations=conversations,
        store=store,
        siblings=siblings,
    )
    settings = GatewaySettings(
        max_body_bytes=server.max_body_bytes,
        max_streams=capacity(server.max_connections, server.max_streams, open_files_limit()).max_streams,
        gate=gate,
        store=store,
        conversations=conversations,
        redact=observed.redactor.redact_json,
        websocket=WebSocketSettings(
            max_message_bytes=server.ws_message_limit,
            max_lifetime=server.ws_max_lifetime,
        ),
        codex_models=tuple(
            CodexModel(model.name, context_window=model.context_window or DEFAULT_CONTEXT_WINDOW, reasoning=model.reasoning)
            for model in config.models
        ),
        compaction_key=compaction_key_for(server.store),
    )
    return create_app(
        build_router(config, default_model=model_override),
        settings,
        observed.observers,
        routes=observed.routes,
        services=() if siblings is None else (siblings,),
    )


def app_from_env() -> ASGIApp:
    """The uvicorn factory: ``uvicorn --factory toolwire.server._factory:app_from_env``."""
    config = GatewayConfig.model_validate_json(os.environ[CONFIG_ENV])
    app = build_app(config, model_override=os.environ.get(MODEL_OVERRIDE_ENV) or None)
    settle_garbage_collector()
    return app


def settle_garbage_collector() -> None:
    """Set the cyclic garbage collector for a server process whose app is built.

    What is alive now (modules, pydantic's validators, the app and its caches) lives as
    long as the process: ``gc.freeze`` takes it out of every later collection. And each
    request in flight holds thousands of containers (its parsed body), almost all freed
    by reference counting, so the default young threshold of 700 set off collections
    several times per request; a higher one only lets the rare cycles wait a little longer.
    Measured at 16 connections (bench): with the defaults, collections took about 10 % of
    the gateway's CPU and each full one paused every stream for about 36 ms; after this,
    well under 0.1 %.
    """
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, middle, old)
