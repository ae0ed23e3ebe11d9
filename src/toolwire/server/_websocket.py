"""Responses over WebSocket: ``GET /v1/responses`` upgraded, one response after another.

The second transport of the exchange pipeline: the Open Responses WebSocket mode, as
the Codex CLI speaks it with its built-in provider. After the handshake the client sends
JSON text messages ``{"type": "response.create", ...the body of POST /v1/responses...}``;
each is handed to ``ExchangePipeline.serve`` in turn (routing, translation, storage,
observers and error mapping as over HTTP), and every event of its stream goes back as
one JSON text message, ending in exactly one terminal event. One response runs at a
time; messages that arrive meanwhile wait their turn (up to ``MAX_WAITING``; reading
pauses beyond that).

Where it differs from HTTP:

* ``previous_response_id`` is looked up in the connection's own recent responses first,
  ``store: false`` ones included, so the client sends only its new items
  (``ConnectionHistory``); an id neither there nor in the store gets an ``error`` event
  with code ``previous_response_not_found``.
* The fields a continuing turn resends unchanged (its tools, instructions, ...) are
  validated once per connection (``TurnFields``): a turn costs what it sends of its own.
* ``generate: false`` creates the response, empty, without asking the model (Codex's
  prewarm, which its next request continues).
* An error before a stream is the event ``{"type": "error", "status": 4xx/5xx,
  "error": {type, code, message, param}}`` (Codex reads the status as it would an HTTP
  one), and the connection stays open; so it does for a message that is not JSON, not
  an object, not text, or not a ``response.create``.
* Bounds: a message over the limit (told in the handshake header
  ``x-codex-websocket-max-message-bytes``) is closed with 1009 by uvicorn
  (``ws_max_size``, counted here); a connection lasts ``max_lifetime`` (the Open
  Responses limit, 60 minutes): it is closed with 1000 once idle, and a message still
  waiting then gets ``websocket_connection_limit_reached`` (which Codex retries on a new
  connection); on shutdown the response in flight finishes (within the grace period)
  and the connection closes with 1001 (``_uvicorn.DrainingWebSocketProtocol``). The
  connection holds its place under ``max_connections`` until it closes
  (``_connections``), and each response one under ``max_streams`` while it runs: past
  that cap a ``response.create`` gets an ``error`` event with status 503 and
  ``retry-after``, and the connection stays open.
* The client going away cancels the response in flight, and its upstream request, at
  once, as over HTTP.

The handshake answers ``x-codex-turn-state`` (echoed when the client sent one) and
``x-reasoning-included`` (the reasoning a client sends back reaches the backend, so the
input tokens it reports count it). It does not send ``openai-model``: the model is named
in each ``response.create``, not at the handshake, and Codex warns of a rerouted model
when that header names another one; every response names its model instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from toolwire.errors import RequestError, ToolwireError
from toolwire.protocol import ResponsesRequest, TurnFields, parse_request
from toolwire.translate import dumps_event

from ._auth import principal_of
from ._history import ConnectionHistory
from ._limits import count_limit
from ._pipeline import ExchangePipeline
from ._transport import Departures, ErrorAnswer
from ._uvicorn import DRAIN_EXTENSION
from .types import Receive, Scope, Send

log = logging.getLogger("toolwire.server")

JSON = dict[str, Any]
MAX_WAITING = 16
"""Messages held while a response runs; beyond them the connection is not read."""
GOING_AWAY = 1001
LIMIT_REACHED = "websocket_connection_limit_reached"
_TERMINAL_BY_STATUS = {"incomplete": "response.incomplete", "failed": "response.failed"}


def handshake_headers(scope: Scope, max_message_bytes: int) -> list[tuple[bytes, bytes]]:
    """The headers of the accepted handshake (see the module docstring)."""
    headers = [
        (b"x-codex-websocket-max-message-bytes", str(max_message_bytes).encode()),
        (b"x-reasoning-included", b"true"),
    ]
    headers.extend((name, value) for name, value in scope["headers"] if name == b"x-codex-turn-state")
    return headers


def error_event(error: ErrorAnswer) -> JSON:
    """An error answered before any stream, as the WebSocket ``error`` event.

    ``error.code`` is always a string here (the error's type when it has no code), as
    the Open Responses WebSocket error event requires.
    """
    body = dict(error.body.get("error") or {})
    body["code"] = body.get("code") or body.get("type") or "server_error"
    event: JSON = {"type": "error", "status": error.status, "error": body}
    if error.retry_after:
        event["headers"] = {"retry-after": error.retry_after}
    return event


class ResponsesWebSocketEndpoint:
    """The ASGI app for a WebSocket at ``/v1/responses``."""

    def __init__(self, pipeline: ExchangePipeline) -> None:
        self.pipeline = pipeline

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (await receive())["type"] != "websocket.connect":
            return
        settings = self.pipeline.settings.websocket
        await send({"type": "websocket.accept", "headers": handshake_headers(scope, settings.max_message_bytes)})
        await ResponsesConnection(self.pipeline, scope, receive, send).run()


@dataclass(frozen=True, slots=True)
class _Message:
    """A message from the client: its text, or None for a binary one (which is refused)."""

    text: str | None


class ResponsesConnection:
    """One accepted WebSocket: its messages answered in order until it ends."""

    def __init__(self, pipeline: ExchangePipeline, scope: Scope, receive: Receive, send: Send) -> None:
        self._pipeline = pipeline
        settings = pipeline.settings
        self._lifetime = settings.websocket.max_lifetime
        self._deadline = asyncio.get_running_loop().time() + self._lifetime
        self.history = ConnectionHistory(pipeline.store_history)
        self._turns = TurnFields()
        self._principal = principal_of(scope)
        self._receive = receive
        self._send = send
        self._messages: asyncio.Queue[_Message] = asyncio.Queue(MAX_WAITING)
        self._stirred = asyncio.Event()
        """Something happened: a message arrived, the client went away, the server is
        shutting down, or the lifetime is over."""
        self.departures = Departures()
        """The watches of the exchange in progress, called when the client goes away
        (``departures.gone`` says it has)."""
        drain = scope.get("extensions", {}).get(DRAIN_EXTENSION)
        self._draining: asyncio.Event = drain["event"] if drain is not None else asyncio.Event()
        if drain is not None:
            drain["wake"].append(self._stirred.set)
        self._lifetime_timer: asyncio.TimerHandle | None = None
        self._closed = False

    async def run(self) -> None:
        reader = asyncio.create_task(self._read())
        self._at_deadline()
        try:
            while (message := await self._next_message()) is not None:
                answering = self._answer(message)
                del message  # the message's text is let go once its body is made
                await answering
        except asyncio.CancelledError:
            # The shutdown's grace period is over; the pipeline has ended the response.
            await self._close(GOING_AWAY, "The gateway is shutting down.")
            raise
        except OSError:
            pass  # the client went away while it was being answered: no one is left to tell
        finally:
            if self._lifetime_timer is not None:
                self._lifetime_timer.cancel()
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    async def send_json(self, event: JSON) -> None:
        await self._send({"type": "websocket.send", "text": dumps_event(event).decode()})

    # ------------------------------------------------------------------ the loop

    async def _next_message(self) -> _Message | None:
        """The next message to answer, or None once the connection is over (closed if need be)."""
        loop = asyncio.get_running_loop()
        while True:
            if self.departures.gone:
                return None
            if self._draining.is_set():
                await self._close(GOING_AWAY, "The gateway is shutting down.")
                return None
            remaining = self._deadline - loop.time()
            if remaining <= 0:
                await self._end_of_life()
                return None
            if not self._messages.empty():
                return self._messages.get_nowait()
            await self._stirred.wait()
            self._stirred.clear()

    def _at_deadline(self) -> None:
        """Stir the connection once its lifetime is over (called again until it is: a
        timer may fire a little early)."""
        loop = asyncio.get_running_loop()
        remaining = self._deadline - loop.time()
        if remaining > 0:
            self._lifetime_timer = loop.call_later(remaining, self._at_deadline)
        else:
            self._lifetime_timer = None
            self._stirred.set()

    async def _answer(self, message: _Message) -> None:
        try:
            event, body, generate = _response_create(message)
        except ToolwireError as error:
            log.info("websocket message refused: %s", error.message)
            await self.send_json(error_event(ErrorAnswer(error.status, error.to_body())))
            return
        serving = self._pipeline.serve(
            body,
            WebSocketTransport(self),
            principal=self._principal,
            history=self.history,
            generate=generate,
            parse=_TurnReader(self._turns, event) if "previous_response_id" in event else parse_request,
        )
        del event, body, message  # the exchange owns the body now, and lets it go once parsed
        await serving

    async def _read(self) -> None:
        while True:
            message = await self._receive()
            if message["type"] == "websocket.receive":
                await self._messages.put(_Message(message.get("text")))
                self._stirred.set()
            elif message["type"] == "websocket.disconnect":
                if message.get("code") == 1009 and not self._closed:
                    count_limit("ws_max_message_bytes")
                self.departures.depart()
                self._stirred.set()
                return

    async def _end_of_life(self) -> None:
        """The lifetime is over: refuse what waits, then close."""
        count_limit("ws_max_lifetime")
        minutes = self._lifetime / 60
        text = f"This WebSocket reached its lifetime limit ({minutes:g} minutes); open a new connection to continue."
        while not self._messages.empty():
            self._messages.get_nowait()
            error = RequestError(text, code=LIMIT_REACHED)
            await self._guarded(self.send_json(error_event(ErrorAnswer(error.status, error.to_body()))))
        await self._close(1000, "connection lifetime limit reached")

    async def _close(self, code: int, reason: str) -> None:
        if not self._closed and not self.departures.gone:
            self._closed = True
            await self._guarded(self._send({"type": "websocket.close", "code": code, "reason": reason}))

    @staticmethod
    async def _guarded(sending: Any) -> None:
        """Send, unless the client is already gone (then there is no one to tell)."""
        with contextlib.suppress(OSError, RuntimeError):
            await sending


class _TurnReader:
    """Reads a continuing turn's body with the connection's ``TurnFields``, given what it
    decodes to, and lets that go once read (an open stream keeps nothing of its request)."""

    __slots__ = ("_decoded", "_turns")

    def __init__(self, turns: TurnFields, decoded: JSON) -> None:
        self._turns = turns
        self._decoded: JSON | None = decoded

    def __call__(self, body: bytes) -> ResponsesRequest:
        decoded, self._decoded = self._decoded, None
        return parse_request(body) if decoded is None else self._turns.parse(body, decoded)


class WebSocketTransport:
    """How one response reaches the client of a ``ResponsesConnection``."""

    __slots__ = ("_connection",)

    def __init__(self, connection: ResponsesConnection) -> None:
        self._connection = connection

    async def send_error(self, error: ErrorAnswer) -> None:
        await self._connection.send_json(error_event(error))

    async def send_response(self, response: JSON) -> None:
        """Not reached (a WebSocket request always streams): the response as its terminal event."""
        kind = _TERMINAL_BY_STATUS.get(str(response.get("status")), "response.completed")
        await self._connection.send_json({"type": kind, "sequence_number": 0, "response": response})

    async def open_stream(self) -> None:
        """A stream needs no preamble here: its events are the messages."""

    async def send_events(self, events: list[Any], *, last: bool) -> None:
        for event in events:
            await self._connection.send_json(event)

    def watch_client(self, on_gone: Callable[[], None]) -> Callable[[], None]:
        return self._connection.departures.watch(on_gone)


def _response_create(message: _Message) -> tuple[JSON, bytes, bool]:
    """A ``response.create`` message as the request body for the pipeline (decoded, and
    its bytes), and its ``generate``.

    Raises ``RequestError`` for anything else.
    """
    if message.text is None:
        raise RequestError("Binary messages are not accepted: send each event as a JSON text message.", code="invalid_message")
    try:
        event = orjson.loads(message.text)
    except orjson.JSONDecodeError as exc:
        raise RequestError(f"The message is not valid JSON: {exc}.", code="invalid_json") from None
    if not isinstance(event, dict):
        raise RequestError("The message must be a JSON object (an event with a 'type').", code="invalid_json")
    kind = event.pop("type", None)
    if kind != "response.create":
        raise RequestError(
            f"Unknown event type {kind!r}: this connection accepts 'response.create'.",
            param="type",
            code="unknown_event_type",
        )
    generate = event.pop("generate", True)
    if not isinstance(generate, bool):
        raise RequestError("'generate' must be a boolean.", param="generate")
    event["stream"] = True  # every answer on a WebSocket is a stream of events
    try:
        return event, orjson.dumps(event), generate
    except orjson.JSONEncodeError:
        raise RequestError("The message is nested too deeply.", code="invalid_json") from None
