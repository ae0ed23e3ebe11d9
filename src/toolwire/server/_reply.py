"""``Reply``: how the answer to one ``POST /v1/responses`` goes out, and the stream pump.

An answer is one of: a JSON error (nothing streamed yet), a JSON Response, or an SSE
stream of events ending in exactly one terminal event. ``Reply`` knows which has
begun, so that when the exchange is cut short (the server shuts down) the client still
gets a proper ending: a 503 if nothing was sent, the stream's failure events if it was
streaming. Every error text that reaches the client goes through the redactor first,
since an upstream may echo a key in its error message.

``pump`` drives any ``StreamMachine`` (``ChatStreamTranslator``,
``ResponsesStreamRestorer``) from a backend's ``StreamBatches``: one write to the client
per upstream read.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from toolwire.errors import ToolwireError, UpstreamError
from toolwire.protocol import encode_event
from toolwire.upstream import StreamBatches

from ._asgi import Send, send_bytes
from ._errors import as_toolwire_error
from ._exchange import Exchange

log = logging.getLogger("toolwire.server")

SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
_FAILURE_EVENTS = frozenset({"error", "response.failed"})

Keep = Callable[[dict[str, Any]], Awaitable[None]]
"""Stores a finished Response object (a no-op when there is no store)."""
Redact = Callable[[bytes], bytes]
"""Serialized JSON in, the same with every secret replaced."""


class StreamMachine(Protocol):
    """A stream translator: objects from the backend in, Responses events out."""

    conversions: list[str]

    @property
    def finished(self) -> bool: ...

    @property
    def response(self) -> dict[str, Any]: ...

    def start(self) -> list[Any]: ...

    def feed(self, item: dict[str, Any]) -> list[Any]: ...

    def finish(self, *, completed_at: int | None = None, ended_cleanly: bool = True) -> list[Any]: ...

    def fail(self, message: str) -> list[Any]: ...


class GatewayShuttingDown(ToolwireError):
    status = 503
    error_type = "service_unavailable"


class Reply:
    """The answer being sent for ``exchange``."""

    def __init__(self, exchange: Exchange, send: Send, redact: Redact) -> None:
        self.exchange = exchange
        self._send = send
        self._redact = redact
        self.started = False
        self.complete = False
        """The answer's last byte has been handed to the server."""
        self.machine: StreamMachine | None = None

    async def error(self, exc: BaseException) -> None:
        """Nothing was sent yet: answer ``exc`` as an OpenAI-shaped JSON error."""
        error = as_toolwire_error(exc)
        self.exchange.finish("error", status=error.status, error=error.message, error_kind=type(error).__name__)
        headers: list[tuple[bytes, bytes]] = []
        if error.retry_after:
            headers.append((b"retry-after", error.retry_after.encode("latin-1", "replace")))
        self.started = True
        await send_bytes(self._send, error.status, self._redact(orjson.dumps(error.to_body())), b"application/json", headers)
        self.complete = True

    async def response(self, response: dict[str, Any]) -> None:
        """A whole (non-streamed) Response object."""
        self.exchange.finish(str(response.get("status", "completed")), response=response)
        self.started = True
        await send_bytes(self._send, 200, orjson.dumps(response), b"application/json")
        self.complete = True

    async def start_stream(self, machine: StreamMachine) -> None:
        self.machine = machine
        self.started = True
        await self._send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})

    async def events(self, events: list[Any], *, last: bool = False) -> None:
        """Send ``events``; ``last`` ends the stream in the same write."""
        if not events:
            if last:
                await self.end_stream()
            return
        self.exchange.note_events(events)
        dumps = orjson.dumps
        frames: list[bytes] = []
        failed = False
        for event in events:
            event_type = event["type"]
            frames.append(encode_event(dumps(event), event_type))
            if event_type in _FAILURE_EVENTS:
                failed = True
        payload = b"".join(frames)
        if failed:
            payload = self._redact(payload)
        await self._send({"type": "http.response.body", "body": payload, "more_body": not last})
        self.complete = last

    async def end_stream(self) -> None:
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})
        self.complete = True

    async def cut_short(self) -> None:
        """The server is shutting down with this exchange unfinished: end it properly."""
        if not self.started:
            await self.error(GatewayShuttingDown("The gateway is shutting down; retry the request."))
        elif self.machine is not None and not self.machine.finished:
            await self.events(self.machine.fail("The gateway is shutting down."), last=True)

    def conclude(self) -> None:
        """Record on the exchange how it ended, if nothing recorded it yet."""
        exchange, machine = self.exchange, self.machine
        if exchange.finished_at is not None:
            return
        if machine is not None:
            exchange.conversions.extend(c for c in machine.conversions if c not in exchange.conversions)
            if machine.finished:
                response = machine.response
                exchange.finish(str(response.get("status")), response=response)
                return
        exchange.finish("disconnected", error="The client went away before the response was complete.")
        if machine is not None:  # what the upstream reported before the client left still counts
            exchange.usage = machine.response.get("usage")
        log.info("client left %s before its response was complete; upstream request cancelled", exchange.request_id)


@dataclass(frozen=True, slots=True)
class PendingStream:
    """Everything an open stream needs, and nothing more: the request and its translation
    are gone by the time it runs, which keeps the memory of each open stream small."""

    opening: AbstractAsyncContextManager[StreamBatches]
    machine: StreamMachine
    keep: Keep

    async def run(self, reply: Reply) -> None:
        """Open the backend's stream and pump it; a failure to open is a plain HTTP error."""
        async with contextlib.AsyncExitStack() as stack:
            try:
                batches = await stack.enter_async_context(self.opening)
            except Exception as exc:  # nothing streamed yet
                await reply.error(exc)
                return
            await pump(reply, batches, self.machine, self.keep)


async def pump(reply: Reply, batches: StreamBatches, machine: StreamMachine, keep: Keep) -> None:
    """Backend batches -> events -> the client, ending in exactly one terminal event.

    The response is stored before its terminal event goes out, so a client that
    continues it at once always finds it.
    """
    await reply.start_stream(machine)
    exchange = reply.exchange
    events = machine.start()  # sent with the first batch: one write, not two
    try:
        async for batch in batches:
            for item in batch:
                exchange.note_chunk(item)
                events.extend(machine.feed(item))
                if machine.finished:
                    break
            if machine.finished or batches.ended_cleanly:
                break  # the end marker came: the terminal events go out in one write with this batch's
            await reply.events(events)
            events = []
        if not machine.finished:
            events.extend(machine.finish(completed_at=int(time.time()), ended_cleanly=batches.ended_cleanly))
        await _keep_quietly(keep, machine.response)
    except UpstreamError as exc:
        events += machine.fail(exc.message)
    except OSError:
        raise  # the client is gone: nothing more can be sent
    except Exception as exc:
        log.error("stream translation failed", exc_info=exc)
        events += machine.fail("The gateway failed while translating the stream.")
    await reply.events(events, last=True)  # the terminal event and the end of the body: one write


async def _keep_quietly(keep: Keep, response: dict[str, Any]) -> None:
    """Mid-stream the client can no longer get an error status: a store failure is logged."""
    try:
        await keep(response)
    except Exception:
        log.exception("storing response %s failed", response.get("id"))
