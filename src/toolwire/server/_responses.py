"""``POST /v1/responses``: read, translate, call the backend, translate back.

The pure core does the work (``parse_request``, ``translate_request``,
``ChatStreamTranslator``); this module only moves bytes. A streaming exchange runs
beside a watcher of the client's connection: when the client goes away, the exchange
is cancelled at once, which closes the upstream connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from typing import Any

import orjson

from toolwire.errors import UpstreamError
from toolwire.protocol import ResponsesRequest, encode_event, parse_request
from toolwire.translate.completion import translate_completion
from toolwire.translate.request import TranslatedRequest, translate_request
from toolwire.translate.stream import ChatStreamTranslator
from toolwire.upstream import ChatBackend, ChatStream

from ._asgi import ClientDisconnected, Receive, Scope, Send, read_body, send_bytes
from ._errors import send_error
from ._routing import ModelRouter
from ._settings import GatewaySettings

log = logging.getLogger("toolwire.server")

_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class ResponsesEndpoint:
    """The ASGI app for ``POST /v1/responses``."""

    def __init__(self, router: ModelRouter, settings: GatewaySettings) -> None:
        self.router = router
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            body = await read_body(scope, receive, self.settings.max_body_bytes)
            request = parse_request(body)
            route = self.router.resolve(request.model)
            translated = translate_request(request, route.profile, model=route.upstream_model)
        except ClientDisconnected:
            return
        except Exception as exc:
            await send_error(send, exc)
            return
        for warning in translated.warnings:
            log.warning("request translation: %s", warning)
        response_id = "resp_" + secrets.token_hex(16)
        if request.stream:
            await self._stream(receive, send, route.backend, request, translated, response_id)
        else:
            await self._complete(send, route.backend, request, translated, response_id)

    async def _complete(
        self,
        send: Send,
        backend: ChatBackend,
        request: ResponsesRequest,
        translated: TranslatedRequest,
        response_id: str,
    ) -> None:
        try:
            completion = await backend.complete(translated.chat)
            response = translate_completion(
                completion,
                request,
                translated.tools,
                response_id=response_id,
                created_at=int(time.time()),
                model=request.model,
            )
        except Exception as exc:
            await send_error(send, exc)
            return
        await send_bytes(send, 200, orjson.dumps(response), b"application/json")

    async def _stream(
        self,
        receive: Receive,
        send: Send,
        backend: ChatBackend,
        request: ResponsesRequest,
        translated: TranslatedRequest,
        response_id: str,
    ) -> None:
        translator = ChatStreamTranslator(
            request,
            translated.tools,
            response_id=response_id,
            created_at=int(time.time()),
            model=request.model,
        )
        async with contextlib.AsyncExitStack() as stack:
            try:
                chunks = await stack.enter_async_context(backend.stream(translated.chat))
            except Exception as exc:  # nothing streamed yet: a plain HTTP error
                await send_error(send, exc)
                return
            await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
            exchange = asyncio.ensure_future(_pump(chunks, translator, send))
            disconnect = asyncio.ensure_future(_wait_for_disconnect(receive))
            try:
                await asyncio.wait({exchange, disconnect}, return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:
                # The server is shutting down and its grace period is over: end the
                # stream properly, so the client sees a failure, not a silent cut.
                await _cancel(exchange, disconnect)
                if not translator.finished:
                    with contextlib.suppress(Exception):
                        await _send_events(send, translator.fail("The gateway is shutting down."))
                        await send({"type": "http.response.body", "body": b"", "more_body": False})
                raise
            await _cancel(exchange, disconnect)
            failure = None if exchange.cancelled() else exchange.exception()
            if isinstance(failure, OSError):
                log.info("client connection of %s lost mid-stream", response_id)
            elif failure is not None:
                log.error("stream of %s failed", response_id, exc_info=failure)
            elif disconnect.done() and not disconnect.cancelled():
                log.info("client disconnected from %s mid-stream; upstream request cancelled", response_id)


async def _pump(chunks: ChatStream, translator: ChatStreamTranslator, send: Send) -> None:
    """Upstream chunks -> translated events -> the client, ending in one terminal event."""
    await _send_events(send, translator.start())
    try:
        async for chunk in chunks:
            events = translator.feed(chunk)
            if events:
                await _send_events(send, events)
            if translator.finished:
                break
        else:
            await _send_events(send, translator.finish())
    except UpstreamError as exc:
        await _send_events(send, translator.fail(exc.message))
    except OSError:
        raise  # the client is gone: nothing more can be sent
    except Exception as exc:
        log.error("stream translation failed", exc_info=exc)
        await _send_events(send, translator.fail("The gateway failed while translating the stream."))
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _send_events(send: Send, events: list[Any]) -> None:
    if events:
        payload = b"".join(encode_event(orjson.dumps(event), event["type"]) for event in events)
        await send({"type": "http.response.body", "body": payload, "more_body": True})


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
