"""The HTTP/1.1 connection layer under the app: uvicorn's httptools protocol, every client read bounded.

uvicorn (0.54, httptools) bounds one thing about a client: how long a kept-alive
connection may sit idle between two requests (``timeout_keep_alive``). The rest is
open-ended, read in its source and measured: a connection that never sends a byte is
never closed; a request head is waited for however slowly it comes, and held whole
however large it grows (one 190 MB header took the gateway from 64 to 353 MB); a body
that drips in is waited for; a client that stops reading holds its stream forever;
``limit_concurrency`` refuses requests but not connections, counts idle connections as
busy, and sends no ``retry-after``; and a body still arriving after its answer cancels
the keep-alive timer without arming it again.

``BoundedHttpToolsProtocol`` is that protocol (the same parser and request cycle) with a
bound on each, in the manner of nginx, every one counted (``count_limit``) under the name
of its setting:

* **head**: complete within ``client_header_timeout`` of the connection's start or, on a
  kept-alive connection, of its first byte (else 408; a connection that sent nothing is
  just closed), and no larger than ``max_header_bytes`` (else 431);
* **body**: no gap longer than ``client_body_timeout`` (nginx's ``client_body_timeout``),
  and on average at least ``client_body_min_rate`` bytes a second, with
  ``client_body_timeout`` of slack (Apache's ``MinRate``): a body dripped fast enough to
  beat the first is caught by the second. Neither clock runs while the gateway is not
  reading (uvicorn stops past 64 kB of body the app has not taken); both start again
  when it reads again. Else 408, or the connection just closed if the
  request was answered already: the rest of a body the app did not read (a 413, a 503)
  is discarded under the same bounds;
* **answer**: a client that takes nothing of it for ``client_send_timeout`` is dropped,
  which ends its exchange and cancels the upstream request;
* **idle**: ``keep_alive_timeout`` between requests (uvicorn's timer, re-armed when a
  body ends after its answer);
* **connections**: ``max_connections`` per process (``ConnectionTable``). At the cap, a
  new connection closes the one that has waited longest for a request (idle, or its head
  not yet complete) and has no bytes on their way, as nginx reuses connections, so silent
  clients cannot keep anyone out (nor can a flood of them push out an honest request
  whose head has arrived but is not read yet); when every connection is busy with a
  request, the new one is answered 503 with ``retry-after`` as soon as its head arrives,
  and past a small overflow it is closed at once, so the process never runs out of file
  descriptors. A connection upgraded to a WebSocket keeps its place, busy, until the
  WebSocket closes (``DrainingWebSocketProtocol.on_connection_lost``); an upgrade asked
  for when every place is busy is answered 503 with ``retry-after`` too.

One change on the hot path: a body's chunks wait for the app as they came (``BodyChunks``),
not copied into uvicorn's ``bytearray`` and out of it again.

The limits are read once per process from the configuration the app factory reads
(``toolwire serve`` puts it in the environment); uvicorn builds this protocol by name
(``http="toolwire.server._connections:BoundedHttpToolsProtocol"``).

Each request's scope also carries the ``watch`` of its connection's ``Departures`` (the
extension ``CLIENT_GONE_EXTENSION``, see ``_transport``): when the connection is lost, the exchanges
it carries are told by a callback, without a task of theirs waiting for ``http.disconnect``.
"""

from __future__ import annotations

import asyncio
import enum
import fcntl
import functools
import itertools
import os
import struct
import termios
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from uvicorn.config import Config
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState

from toolwire._memory import return_freed_memory_soon
from toolwire.config import GatewayConfig, ServerConfig

from ._capacity import capacity, open_files_limit
from ._limits import RETRY_AFTER_SECONDS, busy_body, count_limit
from ._settings import CONFIG_ENV
from ._transport import CLIENT_GONE_EXTENSION, Departures
from ._turn_writes import TurnWrites
from ._uvicorn import DrainingWebSocketProtocol


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    header_timeout: float
    max_header_bytes: int
    body_timeout: float
    body_min_rate: int
    send_timeout: float
    max_connections: int
    overflow: int

    @classmethod
    def of(cls, server: ServerConfig, open_files: int) -> ConnectionLimits:
        caps = capacity(server.max_connections, server.max_streams, open_files)
        return cls(
            header_timeout=server.client_header_timeout,
            max_header_bytes=server.max_header_bytes,
            body_timeout=server.client_body_timeout,
            body_min_rate=server.client_body_min_rate,
            send_timeout=server.client_send_timeout,
            max_connections=caps.max_connections,
            overflow=caps.overflow,
        )


class Admission(enum.Enum):
    ADMITTED = "admitted"
    OVER = "over"  # answered 503 when its head arrives, unless room was made by then
    CLOSED = "closed"  # closed at once


RECLAIM_SCAN = 32
"""How many of the longest-waiting connections are looked at for one with nothing on its way."""


class ConnectionTable:
    """The process's open client connections, and those waiting for a request, oldest first."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.open = 0
        self._waiting: dict[BoundedHttpToolsProtocol, None] = {}
        self._counted: set[BoundedHttpToolsProtocol] = set()
        self._websockets: set[DrainingWebSocketProtocol] = set()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def admit(self, connection: BoundedHttpToolsProtocol) -> Admission:
        """A new connection: count it, making room by closing the longest-waiting one when full."""
        self.open += 1
        self._counted.add(connection)
        if self.open > self.limits.max_connections:
            self._reclaim_one()
        if self.open <= self.limits.max_connections:
            self._waiting[connection] = None
            return Admission.ADMITTED
        if self.open > self.limits.max_connections + self.limits.overflow:
            self._forget(connection)
            count_limit("max_connections")
            return Admission.CLOSED
        return Admission.OVER

    def _reclaim_one(self) -> None:
        """Close the connection that has waited longest for a request and has nothing on
        its way: one whose request's bytes are in the kernel, not yet read (a busy event
        loop reads them a moment after the connection is accepted), is left alone."""
        for candidate in itertools.islice(self._waiting, RECLAIM_SCAN):
            if not candidate.bytes_pending():
                self._forget(candidate)
                count_limit("max_connections_reclaimed")
                candidate.reclaim()
                return

    def has_room(self) -> bool:
        return self.open <= self.limits.max_connections

    def busy(self, connection: BoundedHttpToolsProtocol) -> None:
        """A request's head is complete: the connection is no longer one to reclaim."""
        self._waiting.pop(connection, None)

    def idle(self, connection: BoundedHttpToolsProtocol) -> None:
        """The connection waits for its next request (kept alive)."""
        if connection in self._counted:
            self._waiting[connection] = None

    def closed(self, connection: BoundedHttpToolsProtocol) -> None:
        self._forget(connection)

    def upgraded(self, connection: BoundedHttpToolsProtocol, websocket: DrainingWebSocketProtocol) -> None:
        """``connection`` is now ``websocket``: it keeps its place, busy, until the WebSocket
        closes (the HTTP protocol is let go)."""
        self._waiting.pop(connection, None)
        if connection in self._counted:
            self._counted.discard(connection)
            self._websockets.add(websocket)
            websocket.on_connection_lost = functools.partial(self._websocket_closed, websocket)

    def _websocket_closed(self, websocket: DrainingWebSocketProtocol) -> None:
        if websocket in self._websockets:
            self._websockets.discard(websocket)
            self._one_fewer()

    def _forget(self, connection: BoundedHttpToolsProtocol) -> None:
        self._waiting.pop(connection, None)
        if connection in self._counted:
            self._counted.discard(connection)
            self._one_fewer()

    def _one_fewer(self) -> None:
        """A connection is gone. When it was the last, what the connections held goes back
        to the system a moment later (``return_freed_memory_soon``): after a burst, the
        memory its connections freed as they closed would otherwise stay with the
        allocator, the trims of the bounds it tripped having run before they closed."""
        self.open -= 1
        if self.open == 0:
            return_freed_memory_soon()


_table: ConnectionTable | None = None


def process_table() -> ConnectionTable:
    """This process's table, its limits read from the configuration ``toolwire serve`` set."""
    global _table
    if _table is None:
        raw = os.environ.get(CONFIG_ENV)
        server = GatewayConfig.model_validate_json(raw).server if raw else ServerConfig()
        _table = ConnectionTable(ConnectionLimits.of(server, open_files_limit()))
    return _table


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the bounds described in the module docstring."""

    _writes: TurnWrites
    """The connection's transport as it writes (``connection_made``): the writes of a turn joined."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._table = process_table()
        self._limits = self._table.limits
        self._deadline: asyncio.TimerHandle | None = None  # of the head, or of the body
        self._send_deadline: asyncio.TimerHandle | None = None
        self._awaiting_head = True
        self._head_bytes = 0
        self._body_started = 0.0
        self._body_last = 0.0  # when body bytes last arrived
        self._body_bytes = 0
        self._over_capacity = False
        self._handed_over = False  # to the WebSocket protocol
        self._departures = Departures()
        self._client_gone: dict[object, object] = {"watch": self._departures.watch}  # offered to each request

    # ------------------------------------------------------------------ connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.flow = _ReadingWatched(transport, self._reading_resumed)
        self._writes = TurnWrites(transport, self.loop)
        self.transport = self._writes  # the request cycles get it too
        admission = self._table.admit(self)
        if admission is Admission.CLOSED:
            transport.close()
            return
        self._over_capacity = admission is Admission.OVER
        self._deadline = self.loop.call_later(self._limits.header_timeout, self._head_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        self._cancel_send_deadline()
        self._table.closed(self)
        super().connection_lost(exc)
        # uvicorn stops the keep-alive timer only for a connection that ended cleanly: one
        # reset by its client would stay held by it, with its buffers, for keep_alive_timeout.
        self._unset_keepalive_if_required()
        self._departures.depart()

    def reclaim(self) -> None:
        """Closed to make room for a new connection (it was waiting for a request)."""
        self._cancel_deadline()
        self.transport.close()

    def bytes_pending(self) -> bool:
        """Bytes from the client have arrived that this process has not read yet."""
        try:
            fd = self.transport.get_extra_info("socket").fileno()
            (pending,) = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))
        except (AttributeError, OSError, ValueError):
            return False
        return bool(pending)

    def handle_websocket_upgrade(self) -> None:
        # The WebSocket protocol takes the transport over (and has its own bounds); this
        # one hears no more of it, and the connection keeps its place in the table until
        # the WebSocket closes.
        self._handed_over = True
        self._cancel_deadline()
        if self._over_capacity:  # every place was busy when its head arrived (counted then)
            self._write_and_close(503, _BUSY_BODY, [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())])
            return
        super().handle_websocket_upgrade()
        # uvicorn lets go of the parser (which holds this protocol's methods) only in
        # connection_lost, which an upgraded protocol never hears: without this, the two
        # would wait for the cyclic collector, with the handshake's scope and buffers.
        self.parser = None  # type: ignore[assignment]
        upgraded = self.transport.get_protocol()
        if isinstance(upgraded, DrainingWebSocketProtocol):
            self._table.upgraded(self, upgraded)
        else:  # a protocol that would not say when it ends: not counted, rather than counted forever
            self._table.closed(self)

    def timeout_keep_alive_handler(self) -> None:
        if not self.transport.is_closing():
            count_limit("keep_alive_timeout")
        super().timeout_keep_alive_handler()

    # ------------------------------------------------------------------ reading

    def data_received(self, data: bytes) -> None:
        if self._awaiting_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self.transport.is_closing() or self._handed_over:
            return
        if self._awaiting_head:
            if self._head_bytes > self._limits.max_header_bytes:
                count_limit("max_header_bytes")
                self._answer_and_close(
                    431,
                    f"The request head is larger than the gateway's limit of {self._limits.max_header_bytes} "
                    "bytes (max_header_bytes).",
                    "request_header_too_large",
                )
            elif self._deadline is None and self._head_bytes and self._answered():
                # The first bytes of a request on a kept-alive connection.
                self._deadline = self.loop.call_later(self._limits.header_timeout, self._head_timed_out)
        elif self._deadline is None:  # the body is on its way
            self._deadline = self.loop.call_later(self._limits.body_timeout, self._body_check)

    def on_headers_complete(self) -> None:
        self.scope.setdefault("extensions", {})[CLIENT_GONE_EXTENSION] = self._client_gone
        self._awaiting_head = False
        self._head_bytes = 0
        self._cancel_deadline()
        self._table.busy(self)
        self._body_started = self._body_last = self.loop.time()
        self._body_bytes = 0
        if self._over_capacity and not self._table.has_room():
            count_limit("max_connections")
            app, self.app = self.app, _refuse_busy
            try:
                super().on_headers_complete()
            finally:
                self.app = app
            return
        self._over_capacity = False
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        self._body_last = self.loop.time()
        cycle = self.cycle
        if type(cycle.body) is bytearray and not cycle.body:  # uvicorn's own, empty: see BodyChunks
            cycle.body = BodyChunks()  # type: ignore[assignment]
        super().on_body(body)

    def _reading_resumed(self) -> None:
        """The gateway reads the client again: a body on its way has its clocks start again
        (the client could not send while the kernel's buffers stayed full)."""
        if not self._awaiting_head:
            self._body_started = self._body_last = self.loop.time()
            self._body_bytes = 0

    def on_message_complete(self) -> None:
        self._awaiting_head = True
        self._cancel_deadline()
        super().on_message_complete()
        if self.cycle is not None and self.cycle.response_complete and not self.transport.is_closing():
            # The body ended after its answer: the connection waits for a request now.
            self._table.idle(self)
            if self.timeout_keep_alive_task is None and not self.pipeline:
                self.timeout_keep_alive_task = self.loop.call_later(
                    self.timeout_keep_alive, self.timeout_keep_alive_handler
                )

    def on_response_complete(self) -> None:
        # An answer's last bytes go out now, not at the end of the turn: what the exchange
        # does after its answer (its observers, closing its upstream stream) must not
        # delay them (at one connection, it would delay the client's next request too).
        self._writes.flush()
        super().on_response_complete()
        # A request pipelined behind this one has just been started by uvicorn (its cycle
        # is the connection's newest): the connection is busy again, not waiting.
        if self._awaiting_head and self._answered() and not self.transport.is_closing():
            self._table.idle(self)

    # ------------------------------------------------------------------ writing

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._send_deadline is None:
            self._send_deadline = self.loop.call_later(self._limits.send_timeout, self._send_timed_out)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._cancel_send_deadline()

    # ------------------------------------------------------------------ deadlines

    def _head_timed_out(self) -> None:
        self._deadline = None
        count_limit("client_header_timeout")
        if self._head_bytes:
            self._answer_and_close(
                408,
                f"The request head did not arrive within {self._limits.header_timeout:g} s "
                "(client_header_timeout).",
                "request_timeout",
            )
        else:
            self.transport.close()

    def _body_check(self) -> None:
        """The body's deadline came: move it on if the client kept up, else end the request."""
        self._deadline = None
        limits, now = self._limits, self.loop.time()
        if self.flow.read_paused:
            # The gateway is not reading (it has enough unread): not the client's delay.
            # Looked at again later; the clocks start again when reading resumes.
            self._deadline = self.loop.call_at(now + limits.body_timeout, self._body_check)
            return
        deadline = min(
            self._body_last + limits.body_timeout,
            self._body_started + limits.body_timeout + self._body_bytes / limits.body_min_rate,
        )
        if now < deadline:
            self._deadline = self.loop.call_at(deadline, self._body_check)
            return
        count_limit("client_body_timeout")
        message = (
            f"The request body arrived too slowly: {self._body_bytes} bytes in {now - self._body_started:.0f} s, "
            f"the last {now - self._body_last:.0f} s ago (client_body_timeout {limits.body_timeout:g} s, "
            f"client_body_min_rate {limits.body_min_rate} bytes/s)."
        )
        self._answer_and_close(408, message, "request_timeout")

    def _send_timed_out(self) -> None:
        self._send_deadline = None
        count_limit("client_send_timeout")
        self.transport.abort()  # closing would wait for the unread answer to be flushed

    def _answered(self) -> bool:
        """No answer is in progress on this connection."""
        return self.cycle is None or self.cycle.response_complete

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _cancel_send_deadline(self) -> None:
        if self._send_deadline is not None:
            self._send_deadline.cancel()
            self._send_deadline = None

    def _answer_and_close(self, status: int, message: str, code: str) -> None:
        """A JSON error written straight to the client, then the connection closed; the
        request in progress, if any, sees its client leave. A request already answered,
        or being answered, gets no second answer: the connection is just closed."""
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app's sends are dropped; its receive() says so
            cycle.message_event.set()
        if cycle is not None and cycle.response_started and not (cycle.response_complete and self._awaiting_head):
            self.transport.close()  # an answer is under way, or this request had its answer
            return
        body = orjson.dumps(
            {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
        )
        self._write_and_close(status, body)

    def _write_and_close(self, status: int, body: bytes, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
        head = [STATUS_LINE[status]]
        head.extend(name + b": " + value + b"\r\n" for name, value in [*self.server_state.default_headers, *headers])
        head.append(
            b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body)
        )
        self.transport.write(b"".join(head) + body)
        self.transport.close()


class BodyChunks:
    """A request body's chunks as they came, where uvicorn's request cycle keeps them
    (``cycle.body``) until the app takes them, in place of its ``bytearray``.

    uvicorn adds each chunk (``+=``), measures what is waiting (``len``, against the 64 kB
    past which it stops reading) and, for each ``http.request`` message, takes it
    (``bytes()``) and starts again with an empty ``bytearray``, which ``on_body`` replaces
    with one of these before the next chunk is added. The ``bytearray`` copied each chunk in
    and out again: twice the body, 2.8 MB for a long Codex session's turn. Here a message
    is its chunks joined, one chunk alone given as it is (the usual case, as uvicorn stops
    reading once a chunk is waiting past the mark)."""

    __slots__ = ("_chunks", "_size")

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._size = 0

    def __iadd__(self, chunk: bytes) -> BodyChunks:
        self._chunks.append(chunk)
        self._size += len(chunk)
        return self

    def __len__(self) -> int:
        return self._size

    def __bytes__(self) -> bytes:
        return b"".join(self._chunks)  # (one chunk alone is joined as itself, uncopied)


class _ReadingWatched(FlowControl):
    """uvicorn's flow control, telling the protocol when it reads the client again.

    It holds the protocol's method weakly: a reference back would make each connection's
    protocol, with its buffers, wait for the cyclic collector instead of going when the
    connection does (the memory a burst of connections held would not come back at once)."""

    def __init__(self, transport: asyncio.Transport, resumed: Callable[[], None]) -> None:
        super().__init__(transport)
        self._resumed = weakref.WeakMethod(resumed)

    def resume_reading(self) -> None:
        if self.read_paused:
            super().resume_reading()
            resumed = self._resumed()
            if resumed is not None:
                resumed()


_BUSY_BODY = busy_body(
    "The gateway has as many connections as it allows (max_connections), all busy; "
    f"retry in {RETRY_AFTER_SECONDS} s."
)


async def _refuse_busy(scope: Any, receive: Any, send: Any) -> None:
    """Every connection is busy: 503, ``retry-after``, and the connection closed."""
    body = _BUSY_BODY
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(RETRY_AFTER_SECONDS).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _ConnectionsCollector(Collector):
    """``toolwire_client_connections{state}``: open, and waiting for a request."""

    _HELP = ("toolwire_client_connections", "Client connections of this process, by state.")

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(*self._HELP, labels=["state"])

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(*self._HELP, labels=["state"])
        if _table is not None:
            family.add_metric(["open"], _table.open)
            family.add_metric(["waiting"], _table.waiting)
        yield family


CONNECTIONS_COLLECTOR = _ConnectionsCollector()
