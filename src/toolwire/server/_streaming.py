"""The SSE plumbing every ``/v1/responses`` exchange shares, whatever its backend kind.

A streamed answer is a pump (backend -> events -> client) running beside a watcher of
the client's connection: the first to finish wins, the other is cancelled, so a client
that goes away closes the upstream connection at once. On server shutdown a stream that
is not over gets its failure events before it is cut. ``StreamState`` is what the pump
advances (``ChatStreamTranslator``, ``ResponsesStreamRestorer``); ``conclude`` records
its outcome on the ``Exchange``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import orjson

from toolwire.protocol import encode_event

from ._asgi import Receive, Send
from ._errors import as_toolwire_error, send_error
from ._exchange import Exchange

log = logging.getLogger("toolwire.server")

SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]

Keep = Callable[[dict[str, Any]], Awaitable[None]]
"""Stores a finished Response object (a no-op when there is no store)."""


class StreamState(Protocol):
    """The state machine a pump feeds: it knows when it is finished and how to fail."""

    conversions: list[str]

    @property
    def finished(self) -> bool: ...

    @property
    def response(self) -> dict[str, Any]: ...

    def fail(self, message: str) -> list[Any]: ...


async def fail_before_streaming(exchange: Exchange, send: Send, exc: BaseException) -> None:
    """Nothing was streamed yet: answer ``exc`` as a plain HTTP error."""
    error = as_toolwire_error(exc)
    exchange.finish(
        "error", status=error.status, error=error.message, error_kind=type(error).__name__
    )
    await send_error(send, error)


async def serve_stream(
    exchange: Exchange,
    receive: Receive,
    send: Send,
    pump: Callable[[], Awaitable[None]],
    state: StreamState,
) -> None:
    """Start the SSE response and run ``pump()`` until it ends or the client leaves."""
    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
    pumping = asyncio.ensure_future(pump())
    disconnect = asyncio.ensure_future(wait_for_disconnect(receive))
    try:
        await asyncio.wait({pumping, disconnect}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        # The server is shutting down and its grace period is over: end the
        # stream properly, so the client sees a failure, not a silent cut.
        await cancel(pumping, disconnect)
        if not state.finished:
            with contextlib.suppress(Exception):
                await send_events(exchange, send, state.fail("The gateway is shutting down."))
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        conclude(exchange, state)
        raise
    await cancel(pumping, disconnect)
    failure = None if pumping.cancelled() else pumping.exception()
    if failure is not None and not isinstance(failure, OSError):
        log.error("stream of %s failed", exchange.request_id, exc_info=failure)
    conclude(exchange, state)


def conclude(exchange: Exchange, state: StreamState) -> None:
    exchange.conversions.extend(c for c in state.conversions if c not in exchange.conversions)
    if state.finished:
        response = state.response
        exchange.finish(str(response.get("status")), response=response)
    else:
        exchange.finish(
            "disconnected", error="The client went away before the response was complete."
        )
        log.info("client left %s mid-stream; upstream request cancelled", exchange.request_id)


async def keep_quietly(keep: Keep, response: dict[str, Any]) -> None:
    """Mid-stream the client can no longer get an error status: a store failure is logged."""
    try:
        await keep(response)
    except Exception:
        log.exception("storing response %s failed", response.get("id"))


async def send_events(exchange: Exchange, send: Send, events: list[Any]) -> None:
    if events:
        exchange.note_events(events)
        payload = b"".join(encode_event(orjson.dumps(event), event["type"]) for event in events)
        await send({"type": "http.response.body", "body": payload, "more_body": True})


async def cancel(*tasks: asyncio.Future[None]) -> None:
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


async def wait_for_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
