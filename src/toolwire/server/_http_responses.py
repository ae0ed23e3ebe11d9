"""``POST /v1/responses`` (and ``/v1/responses/compact``) over HTTP: the request body in,
the answer as JSON or SSE out.

The HTTP + SSE transport of the exchange pipeline. ``ResponsesHttpEndpoint`` takes the
exchange's slot under ``max_streams`` (a 503 with ``retry-after`` past it, the body
unread), reads the body (bounded) and hands it to the pipeline with an
``SseTransport``, which frames what the pipeline says: an error as an OpenAI-shaped
JSON body with its status (and ``retry-after``), a whole Response as JSON, a stream as
``text/event-stream`` with one ``event:``/``data:`` block per event and one write per
batch. The client is gone when its connection's ``Departures`` say so (toolwire's HTTP
protocol offers them in the scope), else when the server reports ``http.disconnect``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson

from toolwire.protocol import encode_events
from toolwire.translate import dumps_event

from ._asgi import ClientDisconnected, read_body, send_bytes
from ._auth import principal_of
from ._errors import send_error
from ._pipeline import ExchangePipeline
from ._transport import CLIENT_GONE_EXTENSION, ErrorAnswer, Watch
from .types import Receive, Scope, Send

SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class ResponsesHttpEndpoint:
    """The ASGI app for ``POST /v1/responses``; ``compact``: for ``POST /v1/responses/compact``."""

    def __init__(self, pipeline: ExchangePipeline, *, compact: bool = False) -> None:
        self.pipeline = pipeline
        self._max_body_bytes = pipeline.settings.max_body_bytes
        self._compact = compact

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client_gone = scope.get("extensions", {}).get(CLIENT_GONE_EXTENSION)
        transport = SseTransport(send, receive, client_gone["watch"] if client_gone is not None else None)
        slot = self.pipeline.streams.take()
        if slot is None:  # refused before its body is read
            await transport.send_error(self.pipeline.streams.refusal)
            return
        with slot:
            try:
                body = await read_body(scope, receive, self._max_body_bytes)
            except ClientDisconnected:
                return
            except Exception as exc:
                await send_error(send, exc)
                return
            serving = self.pipeline.serve(
                body, transport, principal=principal_of(scope), compact=self._compact, slot=slot
            )
            del body  # the exchange owns it now, and lets it go once parsed
            await serving


class SseTransport:
    """One HTTP response: a JSON error, a JSON Response, or an SSE stream."""

    __slots__ = ("_receive", "_send", "_watch")

    def __init__(self, send: Send, receive: Receive, watch: Watch | None = None) -> None:
        """``watch``: how the server tells the client's leaving (``Departures.watch``); None:
        by ``http.disconnect``."""
        self._send = send
        self._receive = receive
        self._watch = watch

    async def send_error(self, error: ErrorAnswer) -> None:
        headers = [(b"retry-after", error.retry_after.encode("latin-1", "replace"))] if error.retry_after else []
        await send_bytes(self._send, error.status, orjson.dumps(error.body), b"application/json", headers)

    async def send_response(self, response: dict[str, Any]) -> None:
        await send_bytes(self._send, 200, orjson.dumps(response), b"application/json")

    async def open_stream(self) -> None:
        await self._send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})

    async def send_events(self, events: list[Any], *, last: bool) -> None:
        payload = encode_events([(dumps_event(event), event["type"]) for event in events])
        await self._send({"type": "http.response.body", "body": payload, "more_body": not last})

    def watch_client(self, on_gone: Callable[[], None]) -> Callable[[], None]:
        if self._watch is not None:
            return self._watch(on_gone)
        waiting = asyncio.ensure_future(self._disconnect())

        def ended(waited: asyncio.Future[None]) -> None:
            if not waited.cancelled():
                waited.exception()  # retrieved: a wait that fails counts as the client gone
                on_gone()

        def stop() -> None:
            waiting.cancel()

        waiting.add_done_callback(ended)
        return stop

    async def _disconnect(self) -> None:
        """Return when the server reports ``http.disconnect`` (a server without ``Departures``)."""
        receive = self._receive
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
