"""``POST /v1/responses``: read, translate, call the backend, translate back.

The pure core does the work (``parse_request``, ``translate_request``,
``ChatStreamTranslator``); this module only moves bytes and keeps the ``Exchange``
record that observers (logs, metrics, captures) read. A streaming exchange runs beside
a watcher of the client's connection (``_streaming.serve_stream``): when the client
goes away, the exchange is cancelled at once, which closes the upstream connection.
A model routed to a Responses backend is served by ``_responses_passthrough`` instead.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections.abc import Sequence
from typing import Any

import orjson

from toolwire.errors import RequestError, UpstreamError
from toolwire.protocol import ResponsesRequest, dump_item, parse_item, parse_request
from toolwire.store import ResponseStore, StoredResponse, with_previous
from toolwire.translate.completion import translate_completion
from toolwire.translate.request import TranslatedRequest, translate_request
from toolwire.translate.stream import ChatStreamTranslator
from toolwire.upstream import ChatBackend, ChatStream

from ._asgi import ClientDisconnected, Receive, Scope, Send, read_body, send_bytes
from ._errors import send_error
from ._exchange import Exchange, ExchangeObserver
from ._responses_passthrough import pass_through
from ._routing import ModelRouter, ResponsesRoute
from ._settings import GatewaySettings
from ._streaming import fail_before_streaming, keep_quietly, send_events, serve_stream

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
        for observer in self.observers:
            observer.started(exchange)
        try:
            await self._exchange(exchange, receive, send)
        finally:
            if exchange.finished_at is None:
                exchange.finish("disconnected")
            for observer in self.observers:
                try:
                    observer.finished(exchange)
                except Exception:
                    log.exception("observer %r failed", observer)

    async def _exchange(self, exchange: Exchange, receive: Receive, send: Send) -> None:
        try:
            request = parse_request(exchange.client_request)
            exchange.model, exchange.stream = request.model, bool(request.stream)
            route = self.router.resolve(request.model)
            own_input = [dump_item(item) for item in request.input_items()]
            request = await self._with_history(request, own_input)
            exchange.upstream, exchange.upstream_model = route.upstream_name, route.upstream_model
        except Exception as exc:
            await fail_before_streaming(exchange, send, exc)
            return
        keep = _Keeper(self.settings.store, request, own_input)
        if isinstance(route, ResponsesRoute):
            await pass_through(exchange, receive, send, route, request, keep)
            return
        try:
            translated = translate_request(request, route.profile, model=route.upstream_model)
        except Exception as exc:
            await fail_before_streaming(exchange, send, exc)
            return
        exchange.upstream_request = translated.chat
        exchange.warnings = translated.warnings
        exchange.conversions = list(translated.conversions)
        if request.stream:
            await self._stream(exchange, receive, send, route.backend, request, translated, keep)
        else:
            await self._complete(exchange, send, route.backend, request, translated, keep)

    async def _with_history(self, request: ResponsesRequest, own_input: list[dict[str, Any]]) -> ResponsesRequest:
        """``request`` with the stored conversation before its own input, when it continues one."""
        if request.previous_response_id is None:
            return request
        store = self.settings.store
        if store is None:
            raise RequestError(
                "previous_response_id needs a response store, and this gateway has none (--store).",
                param="previous_response_id",
            )
        chain = await store.chain_input(request.previous_response_id)
        items = [parse_item(item, where=f"input[{n}]") for n, item in enumerate(with_previous(chain, own_input))]
        return request.model_copy(update={"input": items})

    async def _complete(
        self,
        exchange: Exchange,
        send: Send,
        backend: ChatBackend,
        request: ResponsesRequest,
        translated: TranslatedRequest,
        keep: _Keeper,
    ) -> None:
        try:
            completion = await backend.complete(translated.chat)
            exchange.note_chunk(completion)
            response = translate_completion(
                completion,
                request,
                translated.tools,
                response_id=exchange.request_id,
                created_at=int(exchange.received_at),
                model=request.model,
            )
            await keep(response)
        except Exception as exc:
            await fail_before_streaming(exchange, send, exc)
            return
        exchange.finish(str(response.get("status", "completed")), response=response)
        await send_bytes(send, 200, orjson.dumps(response), b"application/json")

    async def _stream(
        self,
        exchange: Exchange,
        receive: Receive,
        send: Send,
        backend: ChatBackend,
        request: ResponsesRequest,
        translated: TranslatedRequest,
        keep: _Keeper,
    ) -> None:
        translator = ChatStreamTranslator(
            request,
            translated.tools,
            response_id=exchange.request_id,
            created_at=int(exchange.received_at),
            model=request.model,
        )
        async with contextlib.AsyncExitStack() as stack:
            try:
                chunks = await stack.enter_async_context(backend.stream(translated.chat))
            except Exception as exc:  # nothing streamed yet: a plain HTTP error
                await fail_before_streaming(exchange, send, exc)
                return
            await serve_stream(
                exchange, receive, send, lambda: _pump(exchange, chunks, translator, send, keep), translator
            )


async def _pump(
    exchange: Exchange, chunks: ChatStream, translator: ChatStreamTranslator, send: Send, keep: _Keeper
) -> None:
    """Upstream chunks -> translated events -> the client, ending in one terminal event.

    The response is stored before its terminal event goes out, so a client that
    continues it at once always finds it.
    """
    await send_events(exchange, send, translator.start())
    try:
        async for chunk in chunks:
            exchange.note_chunk(chunk)
            events = translator.feed(chunk)
            if translator.finished:
                await keep_quietly(keep, translator.response)
            if events:
                await send_events(exchange, send, events)
            if translator.finished:
                break
        else:
            events = translator.finish(completed_at=int(time.time()))
            await keep_quietly(keep, translator.response)
            await send_events(exchange, send, events)
    except UpstreamError as exc:
        await send_events(exchange, send, translator.fail(exc.message))
    except OSError:
        raise  # the client is gone: nothing more can be sent
    except Exception as exc:
        log.error("stream translation failed", exc_info=exc)
        await send_events(exchange, send, translator.fail("The gateway failed while translating the stream."))
    await send({"type": "http.response.body", "body": b"", "more_body": False})


class _Keeper:
    """Stores a finished response (``store`` defaults to true) with the request's own input."""

    def __init__(self, store: ResponseStore | None, request: ResponsesRequest, own_input: list[dict[str, Any]]) -> None:
        self._store = store if request.store is not False else None
        self._own_input = own_input
        self._previous = request.previous_response_id

    async def __call__(self, response: dict[str, Any]) -> None:
        if self._store is not None:
            record = StoredResponse.from_exchange(response, self._own_input, previous_response_id=self._previous)
            await self._store.put(record)
