"""The gateway's app served in the test's own process, by uvicorn, as ``toolwire serve`` serves it.

``serving(app)`` runs a ``uvicorn.Server`` in the running event loop, on a free loopback
port, with toolwire's protocols (``uvicorn_protocols``: the bounded httptools protocol of
``server/_connections`` and the draining WebSocket protocol of ``server/_uvicorn``), and
yields its ``http://127.0.0.1:<port>``; leaving the block shuts it down as SIGTERM would
(the app's lifespan closes its backends and stores). ``gateway_app(config)`` builds the
app exactly as each worker of ``toolwire serve`` does (``build_app``), minus the garbage
collector settings a serving process makes for itself. ``gateway_client(config)`` is both,
with an httpx client of it; ``sse_events`` reads a streamed answer.

These are for tests whose code must run in the test process: mutation testing learns
only there which tests reach which code. Everything else is as real as
``GatewayProcess``: real sockets, real HTTP and WebSocket clients, the scripted upstreams
of tests/support as the backends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import uvicorn

from tests.support.gateway import UPSTREAM_KEY_ENV
from toolwire.cli._serve import uvicorn_protocols
from toolwire.config import GatewayConfig, ServerConfig, UpstreamConfig
from toolwire.protocol import SSEDecoder
from toolwire.server._factory import build_app
from toolwire.server._limits import LIMITS_TRIPPED
from toolwire.server.types import ASGIApp, Receive, Scope, Send

__all__ = ["as_asgi3", "chat_config", "gateway_app", "gateway_client", "serving", "sse_events", "uvicorn_serving"]


def chat_config(upstream_url: str, *, models: list[dict[str, Any]] | None = None, **server: Any) -> GatewayConfig:
    """One default Chat upstream, ``local``, its key in ``UPSTREAM_KEY_ENV``; the ``[server]``
    settings given (a memory store unless ``store`` says otherwise)."""
    server.setdefault("store", "memory://")
    upstream = UpstreamConfig(name="local", base_url=upstream_url, api_key_env=UPSTREAM_KEY_ENV, default=True)
    return GatewayConfig.model_validate(
        {"server": ServerConfig(**server).model_dump(), "upstreams": [upstream.model_dump()], "models": models or []}
    )


def gateway_app(config: GatewayConfig, *, model_override: str | None = None) -> ASGIApp:
    """The app a worker of ``toolwire serve`` builds from ``config`` (keys read from the
    environment now, as there)."""
    return build_app(config, model_override=model_override)


def as_asgi3(app: ASGIApp) -> ASGIApp:
    """``app`` behind a plain ``async def (scope, receive, send)``, for ``uvicorn.Config``.

    uvicorn calls the app it is given with no arguments to find out whether it is a
    factory. Mutation testing (mutmut) wraps every method of the code it mutates in a
    ``(*args, **kwargs)`` trampoline, which such a call does not refuse: uvicorn would
    then serve the coroutine it got back. This function refuses it, as the app does.
    """

    async def asgi3(scope: Scope, receive: Receive, send: Send) -> None:
        await app(scope, receive, send)

    return asgi3


@contextlib.asynccontextmanager
async def serving(
    app: ASGIApp, server: ServerConfig | None = None, *, timeout: float = 20.0, http: str | None = None
) -> AsyncIterator[str]:
    """``app`` served on a free loopback port until the block ends; its URL. ``http``:
    uvicorn's HTTP protocol instead of toolwire's (``"httptools"``: uvicorn's own)."""
    async with uvicorn_serving(app, server, timeout=timeout, http=http) as (url, _):
        yield url


@contextlib.asynccontextmanager
async def uvicorn_serving(
    app: ASGIApp,
    server: ServerConfig | None = None,
    *,
    timeout: float = 20.0,
    http: str | None = None,
    ws: str | None = None,
) -> AsyncIterator[tuple[str, uvicorn.Server]]:
    """``serving``, with the ``uvicorn.Server`` itself: ``server.should_exit = True`` begins
    its shutdown as SIGTERM does (the block's end then waits for it). ``http`` and ``ws``
    name other protocols than ``toolwire serve``'s."""
    settings = server or ServerConfig()
    config = uvicorn.Config(
        as_asgi3(app),
        host="127.0.0.1",
        port=0,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_keep_alive=settings.keep_alive_timeout,
        timeout_graceful_shutdown=settings.shutdown_grace,
        **{**uvicorn_protocols(settings), **{name: protocol for name, protocol in (("http", http), ("ws", ws)) if protocol}},
    )
    served = uvicorn.Server(config)
    task = asyncio.ensure_future(served.serve())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not served.started:
        if task.done():
            task.result()
            raise RuntimeError("uvicorn stopped before it started")
        if loop.time() > deadline:
            served.should_exit = True
            await task
            raise TimeoutError(f"uvicorn did not start within {timeout} s")
        await asyncio.sleep(0.01)
    port = served.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", served
    finally:
        served.should_exit = True
        await task


@contextlib.asynccontextmanager
async def gateway_client(
    config: GatewayConfig, *, model_override: str | None = None, timeout: float = 30.0
) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of ``config``'s gateway served in this process (``base_url`` its root)."""
    app = gateway_app(config, model_override=model_override)
    async with serving(app, config.server) as url, httpx.AsyncClient(base_url=url, timeout=timeout) as client:
        yield client


def sse_events(body: bytes) -> list[dict[str, Any]]:
    """The JSON events of an SSE body, each checked to be framed ``event: <type>`` + ``data``."""
    events = []
    for event in SSEDecoder().feed(body):
        data = orjson.loads(event.data)
        assert event.event == data["type"], (event.event, data["type"])
        events.append(data)
    return events


def tripped_here(limit: str) -> float:
    """``toolwire_limits_tripped_total{limit=...}`` as this process has counted it so far (the
    counter is the process's: a test compares it before and after, not with a fixed number)."""
    [family] = LIMITS_TRIPPED.collect()
    return sum(s.value for s in family.samples if s.name.endswith("_total") and s.labels["limit"] == limit)
