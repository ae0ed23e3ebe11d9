"""The ASGI application: routes, lifespan, and health endpoints.

``/v1/responses`` is served by both transports: ``POST`` over HTTP + SSE, ``GET`` with
``Upgrade: websocket`` over a WebSocket. ``/readyz`` is ready when the stores answer and
every upstream does. The lifespan hands uvicorn's protocols the
settings they enforce (``_uvicorn``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import cast

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

from toolwire.errors import NotFoundError, UpstreamError
from toolwire.store import StoreUnavailable

from ._admin import admin_routes
from ._auth import ClientAuth
from ._exchange import ExchangeObserver
from ._http_responses import ResponsesHttpEndpoint
from ._model_list import model_list
from ._pipeline import ExchangePipeline
from ._routing import ModelRouter
from ._settings import GatewaySettings
from ._stored import stored_routes
from ._websocket import ResponsesWebSocketEndpoint
from .observe import KeyUsageObserver, LogObserver
from .types import ASGIApp, Receive, Scope, Send


def create_app(
    router: ModelRouter,
    settings: GatewaySettings | None = None,
    observers: Sequence[ExchangeObserver] | None = None,
    *,
    routes: Sequence[BaseRoute] = (),
    services: Sequence[AbstractAsyncContextManager[object]] = (),
) -> ASGIApp:
    """The gateway as an ASGI app over ``router``'s backends; with a key gate, behind ``ClientAuth``.

    ``routes`` are served beside the API (``observability(config).routes``: ``/metrics``, ``/ui``);
    ``services`` are entered while the app runs (its lifespan), as the worker's line to
    the other workers (``_siblings``).
    """
    settings = settings or GatewaySettings()
    observers = [LogObserver()] if observers is None else list(observers)
    gate = settings.gate
    if gate is not None:
        observers.append(KeyUsageObserver(gate))

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        try:
            await stores_answer(settings)
            await router.check()
        except (StoreUnavailable, UpstreamError) as exc:
            return JSONResponse({"status": "unavailable", "reason": exc.message}, status_code=503)
        return JSONResponse({"status": "ready"})

    async def not_found(request: Request, exc: Exception) -> Response:
        error = NotFoundError(f"No route for {request.method} {request.url.path}.")
        return JSONResponse(error.to_body(), status_code=404)

    async def method_not_allowed(request: Request, exc: Exception) -> Response:
        body = {"error": {"message": f"{request.method} is not allowed on {request.url.path}.",
                          "type": "invalid_request_error", "param": None, "code": "method_not_allowed"}}
        return JSONResponse(body, status_code=405, headers=allow_header(cast(HTTPException, exc)))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with contextlib.AsyncExitStack() as running:
                for service in services:
                    await running.enter_async_context(service)
                yield
        finally:
            await router.aclose()
            if settings.store is not None:
                await settings.store.aclose()
            if gate is not None:
                await gate.aclose()
            await settings.compaction_key.aclose()

    pipeline = ExchangePipeline(router, settings, observers)
    responses = ResponsesHttpEndpoint(pipeline)
    responses_websocket = ResponsesWebSocketEndpoint(pipeline)
    app = Starlette(
        routes=[
            Route("/v1/responses", responses, methods=["POST"]),
            WebSocketRoute("/v1/responses", responses_websocket),
            Route("/v1/responses/compact", ResponsesHttpEndpoint(pipeline, compact=True), methods=["POST"]),
            Route("/v1/models", model_list(router, settings.codex_models), methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            *(stored_routes(settings.store) if settings.store is not None else ()),
            *admin_routes(gate),
            *routes,
        ],
        exception_handlers={404: not_found, 405: method_not_allowed},
        lifespan=lifespan,
    )
    served = _ResponsesFastPath(responses, responses_websocket, app)
    return ClientAuth(served, gate) if gate is not None else served


async def stores_answer(settings: GatewaySettings) -> None:
    """Raise ``StoreUnavailable`` unless the stores a request may need answer now: the key
    store (client keys are looked up there: on a gateway without static keys, while it
    cannot answer, every request is refused with 503) and the response store. Each is
    asked the cheapest question it answers."""
    gate = settings.gate
    if gate is not None and gate.store is not None:
        await gate.store.has_keys()
    if settings.store is not None:
        await settings.store.stored_bytes()


def allow_header(refusal: HTTPException) -> dict[str, str]:
    """The ``Allow`` header of a 405: the methods Starlette names, sorted (it lists a
    route's methods in a set's order, which differs from one process to the next)."""
    methods = (refusal.headers or {})["Allow"].split(", ")
    return {"allow": ", ".join(sorted(methods))}


class _ResponsesFastPath:
    """``POST /v1/responses`` and its WebSocket straight to their endpoints; everything
    else through Starlette.

    Every ASGI message of a stream (over a WebSocket: every event) otherwise passes
    through Starlette's router and its two exception middlewares; the endpoints answer
    all their own errors, so they need neither.
    """

    def __init__(self, responses: ASGIApp, websocket: ASGIApp, app: ASGIApp) -> None:
        self.responses = responses
        self.websocket = websocket
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if scope.get("path") == "/v1/responses":
            if kind == "http" and scope["method"] == "POST":
                await self.responses(scope, receive, send)
                return
            if kind == "websocket":
                await self.websocket(scope, receive, send)
                return
        await self.app(scope, receive, send)
