"""``Answer``: what has been said to the client about one exchange, whatever the transport.

An answer is one of: an error (nothing streamed yet), a whole Response object, or a
stream of events ending in exactly one terminal event. ``Answer`` records each on the
``Exchange`` and hands it to the ``Transport``, and knows which has begun, so that when
the exchange is cut short (the server shuts down) the client still gets a proper ending:
an error if nothing was sent, the stream's failure events if it was streaming, and a
finished stream's own last events if only the storing of its response was cut short. Every
error text that reaches the client goes through the redactor first, since an upstream
may echo a key in its error message.

``pump`` drives a backend's ``AnswerTranslator`` from its ``StreamBatches``: one delivery
to the client per upstream read. While the upstream only keeps its stream alive, or says
nothing at all (a model server reading a long prompt), the client hears that the response
is in progress (``KEEP_ALIVE_EVERY``): Codex's idle timer counts events, not the SSE
comments a server pings with, and would give up on a stream that is alive.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from toolwire.errors import ToolwireError, UpstreamError
from toolwire.translate import AnswerTranslator
from toolwire.upstream import StreamBatches

from ._errors import as_toolwire_error
from ._exchange import Exchange
from ._transport import ErrorAnswer, Transport

log = logging.getLogger("toolwire.server")

_FAILURE_EVENTS = frozenset({"error", "response.failed"})

KEEP_ALIVE_EVERY = 10.0
"""Seconds between two ``response.in_progress`` sent while the upstream says only that it is
alive, or nothing (its reader hears so every ``upstream.QUIET_EVERY``, 15 s): well inside
Codex's idle timeout, 300 s by default."""

Keep = Callable[[dict[str, Any]], Awaitable[None]]
"""Stores a finished Response object (a no-op when there is no store)."""
Redact = Callable[[bytes], bytes]
"""Serialized JSON in, the same with every secret replaced."""


class GatewayShuttingDown(ToolwireError):
    status = 503
    error_type = "service_unavailable"


class Answer:
    """The answer being given for ``exchange`` through ``transport``."""

    def __init__(self, exchange: Exchange, transport: Transport, redact: Redact) -> None:
        self.exchange = exchange
        self._transport = transport
        self._redact = redact
        self.started = False
        self.complete = False
        """The answer's last byte has been handed to the transport."""
        self.machine: AnswerTranslator | None = None
        self._held: list[Any] | None = None
        """A finished stream's last events, kept back while its response is stored."""

    async def error(self, exc: BaseException) -> None:
        """Nothing was sent yet: answer ``exc`` as an OpenAI-shaped error."""
        error = as_toolwire_error(exc)
        self.exchange.finish("error", status=error.status, error=error.message, error_kind=type(error).__name__)
        body = orjson.loads(self._redact(orjson.dumps(error.to_body())))
        self.started = True
        await self._transport.send_error(ErrorAnswer(error.status, body, error.retry_after or None))
        self.complete = True

    async def response(self, response: dict[str, Any]) -> None:
        """A whole (non-streamed) Response object."""
        self.exchange.finish(str(response.get("status", "completed")), response=response)
        self.started = True
        await self._transport.send_response(response)
        self.complete = True

    async def start_stream(self, machine: AnswerTranslator) -> None:
        self.machine = machine
        self.started = True
        await self._transport.open_stream()

    async def events(self, events: list[Any], *, last: bool = False) -> None:
        """Send ``events``; ``last`` ends the stream in the same delivery."""
        if events:
            self.exchange.note_events(events)
            if last:  # a failure is always the end of a stream
                events = [self._redacted(event) if event["type"] in _FAILURE_EVENTS else event for event in events]
        elif not last:
            return
        await self._transport.send_events(events, last=last)
        self.complete = last

    async def cut_short(self) -> None:
        """The server is shutting down with this exchange unfinished: end it properly."""
        if not self.started:
            await self.error(GatewayShuttingDown("The gateway is shutting down; retry the request."))
        elif self.machine is not None and not self.machine.finished:
            await self.events(self.machine.fail("The gateway is shutting down."), last=True)
        elif self._held is not None:  # the answer is whole; only storing it was cut short
            await self.events(self.release(), last=True)

    def hold(self, events: list[Any]) -> None:
        """Keep a finished stream's last events back (while its response is stored);
        ``cut_short`` sends them if the exchange is cut short before ``release``."""
        self._held = events

    def release(self) -> list[Any]:
        """The events ``hold`` kept back, now to be sent by the caller."""
        events, self._held = self._held or [], None
        return events

    def conclude(self, failure: Exception | None = None) -> None:
        """Record on the exchange how it ended, if nothing recorded it yet: ``failure``
        is what broke the exchange, if something in the gateway did (else the client left)."""
        exchange, machine = self.exchange, self.machine
        if exchange.finished_at is not None:
            return
        if machine is not None:
            exchange.note_conversions(machine.conversions)
            if machine.finished:
                response = machine.response
                exchange.finish(str(response.get("status")), response=response)
                return
        if failure is not None:
            kind = type(failure).__name__
            exchange.finish("error", error=f"The gateway failed while answering ({kind}).", error_kind=kind)
        else:
            exchange.finish("disconnected", error="The client went away before the response was complete.")
            log.info("client left %s before its response was complete; upstream request cancelled", exchange.request_id)
        if machine is not None:  # what the upstream reported before the exchange ended still counts
            exchange.usage = machine.response.get("usage")

    def _redacted(self, event: dict[str, Any]) -> dict[str, Any]:
        redacted: dict[str, Any] = orjson.loads(self._redact(orjson.dumps(event)))
        return redacted


async def pump(
    answer: Answer, batches: StreamBatches, machine: AnswerTranslator, keep: Keep, opening: list[Any] | None = None
) -> None:
    """Backend batches -> events -> the client, ending in exactly one terminal event.

    ``opening``: the machine's ``start`` events, when they were made already. The response
    is stored before its terminal event goes out, so a client that continues it at once
    always finds it.
    """
    await answer.start_stream(machine)
    exchange = answer.exchange
    events = machine.start() if opening is None else opening  # sent with the first batch: one delivery, not two
    told_alive = exchange.started_at
    try:
        async for batch in batches:
            for item in batch:
                exchange.note_chunk(item)
                events.extend(machine.feed(item))
                if machine.finished:
                    break
            if machine.finished or batches.ended_cleanly:
                break  # the end marker came: the terminal events go out with this batch's
            if not events:  # a keep-alive, or what says nothing to the client yet
                now = time.monotonic()
                if now - told_alive >= KEEP_ALIVE_EVERY:
                    told_alive = now
                    events = machine.keep_alive()
            await answer.events(events)
            events = []
        if not machine.finished:
            events.extend(machine.finish(completed_at=int(time.time()), ended_cleanly=batches.ended_cleanly))
        answer.hold(events)
        await _keep_quietly(keep, machine.response)
        events = answer.release()
    except UpstreamError as exc:
        events += machine.fail(exc.message)
    except OSError:
        raise  # the client is gone: nothing more can be sent
    except Exception as exc:
        log.error("stream translation failed", exc_info=exc)
        events += machine.fail("The gateway failed while translating the stream.")
    await answer.events(events, last=True)  # the terminal event and the end of the stream: one delivery


async def _keep_quietly(keep: Keep, response: dict[str, Any]) -> None:
    """Mid-stream the client can no longer get an error status: a store failure is logged."""
    try:
        await keep(response)
    except Exception:
        log.exception("storing response %s failed", response.get("id"))
