"""``POST /v1/responses``: read, translate, call the backend, translate back.

The pure core does the work (``parse_request``, ``translate_request``,
``ChatStreamTranslator``); this module only moves bytes and keeps the ``Exchange``
record that observers (logs, metrics, captures) read. The whole exchange runs beside a
watcher of the client's connection: when the client goes away, before the upstream's
first byte or mid-stream, the exchange is cancelled at once, which closes the upstream
connection. A model routed to a Responses backend is served by
``_responses_passthrough`` instead.

The caller ``ClientAuth`` found is admitted by the ``KeyGate`` once the model is known
(``gate.admit``: 403, 429); what it stores is kept under its owner, and only its own
stored responses can be continued.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Sequence
from typing import Any

from toolwire.errors import RequestError
from toolwire.keys import Principal
from toolwire.protocol import ResponsesRequest, dump_item, parse_item, parse_request
from toolwire.store import PreviousResponseNotFound, ResponseStore, StoredResponse, with_previous
from toolwire.translate.completion import translate_completion
from toolwire.translate.request import translate_request
from toolwire.translate.stream import ChatStreamTranslator

from ._asgi import ClientDisconnected, Receive, Scope, Send, read_body
from ._auth import principal_of
from ._errors import send_error
from ._exchange import Exchange, ExchangeObserver
from ._reply import PendingStream, Reply
from ._responses_passthrough import pass_through
from ._routing import ModelRouter, ResponsesRoute, Route
from ._settings import GatewaySettings

log = logging.getLogger("toolwire.server")


class ResponsesEndpoint:
    """The ASGI app for ``POST /v1/responses``."""

    def __init__(
        self, router: ModelRouter, settings: GatewaySettings, observers: Sequence[ExchangeObserver] = ()
    ) -> None:
        self.router = router
        self.settings = settings
        self.observers = tuple(observers)
        self._record_traffic = any(observer.wants_traffic for observer in self.observers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            body = await read_body(scope, receive, self.settings.max_body_bytes)
        except ClientDisconnected:
            return
        except Exception as exc:
            await send_error(send, exc)
            return
        exchange = Exchange("resp_" + secrets.token_hex(16), body, record_traffic=self._record_traffic)
        del body  # the exchange keeps it only when an observer records traffic
        principal = principal_of(scope)
        exchange.key_name = principal.name if principal is not None else None
        reply = Reply(exchange, send, self.settings.redact)
        for observer in self.observers:
            observer.started(exchange)
        work = asyncio.ensure_future(self._serve(exchange, reply, principal))
        disconnect = asyncio.ensure_future(_wait_for_disconnect(receive))
        try:
            await asyncio.wait({work, disconnect}, return_when=asyncio.FIRST_COMPLETED)
            if reply.complete and not work.done():
                # The answer is out, which the server reports as a disconnect; the exchange
                # is still closing its upstream stream (reading the rest of the body puts
                # the connection back in the pool, for a second at most): let it.
                await asyncio.wait({work})
        except asyncio.CancelledError:
            # The server is shutting down and its grace period is over.
            await _cancel(work, disconnect)
            with contextlib.suppress(Exception):
                await reply.cut_short()
            raise
        finally:
            await _cancel(work, disconnect)
            failure = None if work.cancelled() else work.exception()
            if failure is not None and not isinstance(failure, OSError):
                log.error("exchange %s failed", exchange.request_id, exc_info=failure)
            reply.conclude()
            for observer in self.observers:
                try:
                    observer.finished(exchange)
                except Exception:
                    log.exception("observer %r failed", observer)

    async def _serve(self, exchange: Exchange, reply: Reply, principal: Principal | None) -> None:
        pending = await self._prepare(exchange, reply, principal)
        if pending is not None:
            await pending.run(reply)

    async def _prepare(self, exchange: Exchange, reply: Reply, principal: Principal | None) -> PendingStream | None:
        """Answer the request, or prepare its stream: None when the answer was sent."""
        try:
            request = parse_request(exchange.client_request)
            if not exchange.record_traffic:
                exchange.client_request = b""
            exchange.model, exchange.stream = request.model, bool(request.stream)
            route = self.router.resolve(request.model)
            exchange.upstream, exchange.upstream_model = route.upstream_name, route.upstream_model
            if self.settings.gate is not None:
                exchange.lease = await self.settings.gate.admit(principal, request.model)
            owner = principal.owner if principal is not None else None
            keep = _Keeper.for_request(self.settings.store, request, owner)
            request = await self._with_history(request, keep, owner)
        except Exception as exc:
            await reply.error(exc)
            return None
        if isinstance(route, ResponsesRoute):
            return await pass_through(reply, route, request, keep)
        return await _serve_chat(reply, route, request, keep)

    async def _with_history(self, request: ResponsesRequest, keep: _Keeper, owner: str | None) -> ResponsesRequest:
        """``request`` with the stored conversation before its own input, when it continues one
        of ``owner``'s responses (anyone else's is not found)."""
        if request.previous_response_id is None:
            return request
        store = self.settings.store
        if store is None:
            raise RequestError(
                "previous_response_id needs a response store, and this gateway has none (--store).",
                param="previous_response_id",
            )
        previous = await store.get(request.previous_response_id)
        if previous is None or not previous.visible_to(owner):
            raise PreviousResponseNotFound(request.previous_response_id)
        chain = await store.chain_input(request.previous_response_id)
        full = with_previous(chain, keep.own_input(request))
        return request.model_copy(update={"input": [parse_item(item, where=f"input[{n}]") for n, item in enumerate(full)]})


async def _serve_chat(reply: Reply, route: Route, request: ResponsesRequest, keep: _Keeper) -> PendingStream | None:
    exchange = reply.exchange
    try:
        translated = translate_request(request, route.profile, model=route.upstream_model)
    except Exception as exc:
        await reply.error(exc)
        return None
    exchange.note_upstream_request(translated.chat)
    exchange.warnings = translated.warnings
    exchange.conversions = list(translated.conversions)
    created_at = int(exchange.received_at)
    if not request.stream:
        try:
            completion = await route.backend.complete(translated.chat)
            exchange.note_chunk(completion)
            response = translate_completion(
                completion, request, translated.tools, response_id=exchange.request_id, created_at=created_at, model=request.model
            )
            await keep(response)
        except Exception as exc:
            await reply.error(exc)
            return None
        await reply.response(response)
        return None
    translator = ChatStreamTranslator(
        request, translated.tools, response_id=exchange.request_id, created_at=created_at, model=request.model
    )
    return PendingStream(route.backend.stream(translated.chat), translator, keep)


class _Keeper:
    """Stores a finished response (``store`` defaults to true) with the request's own input,
    under the ``owner`` of the key that made it."""

    def __init__(self, store: ResponseStore | None, previous_response_id: str | None, owner: str | None) -> None:
        self._store = store
        self._previous = previous_response_id
        self._owner = owner
        self._own_input: list[dict[str, Any]] | None = None

    @classmethod
    def for_request(cls, store: ResponseStore | None, request: ResponsesRequest, owner: str | None) -> _Keeper:
        keeper = cls(store if request.store is not False else None, request.previous_response_id, owner)
        if keeper._store is not None or request.previous_response_id is not None:
            keeper.own_input(request)
        return keeper

    def own_input(self, request: ResponsesRequest) -> list[dict[str, Any]]:
        """The request's own input items as JSON (taken before history is merged in)."""
        if self._own_input is None:
            self._own_input = [dump_item(item) for item in request.input_items()]
        return self._own_input

    async def __call__(self, response: dict[str, Any]) -> None:
        if self._store is not None and self._own_input is not None:
            record = StoredResponse.from_exchange(
                response, self._own_input, previous_response_id=self._previous, owner=self._owner
            )
            await self._store.put(record)


async def _cancel(*tasks: asyncio.Future[None]) -> None:
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


async def _wait_for_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
