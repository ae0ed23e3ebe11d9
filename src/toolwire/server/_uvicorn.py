"""What toolwire asks of uvicorn's connection protocols beyond their settings.

``toolwire serve`` runs uvicorn with these two protocol classes (``http=`` and ``ws=``),
each a thin subclass of the implementation uvicorn would pick anyway (httptools for
HTTP/1.1; for WebSocket the sans-I/O protocol over the ``websockets`` package, whose
``ws_max_size``, ``ws_ping_interval`` and ``ws_ping_timeout`` toolwire sets):

* ``HandshakeTimedHttpProtocol``: a new connection that has not sent its request head
  (a WebSocket upgrade, or any request) within ``handshake_timeout`` seconds is closed.
  uvicorn has no such bound: a client could open connections and send nothing.
* ``DrainingWebSocketProtocol``: on shutdown uvicorn closes every WebSocket at once
  (1012), cutting the responses they carry. This one instead sets the connection's
  ``toolwire.drain`` event (an ASGI scope extension): the app lets the response in
  flight finish, within the grace period, and then closes with 1001. It also counts a
  connection dropped because its pong never came.

The app hands them its settings through the ASGI lifespan state (``PROTOCOL_STATE``),
which uvicorn gives every protocol it creates; without it they behave as uvicorn's own.
"""

from __future__ import annotations

import asyncio
from asyncio import TimerHandle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.http11 import Request

PROTOCOL_STATE = "toolwire.protocols"
DRAIN_EXTENSION = "toolwire.drain"
"""``scope["extensions"][DRAIN_EXTENSION]["event"]``: set when the server shuts down."""


@dataclass(frozen=True, slots=True)
class ProtocolSettings:
    handshake_timeout: float | None
    limit_tripped: Callable[[str], None]


def _settings(app_state: dict[str, Any]) -> ProtocolSettings | None:
    settings = app_state.get(PROTOCOL_STATE)
    return settings if isinstance(settings, ProtocolSettings) else None


class HandshakeTimedHttpProtocol(HttpToolsProtocol):
    """httptools' protocol, closing a new connection whose request head does not come in time."""

    _head_timer: TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        settings = _settings(self.app_state)
        if settings is not None and settings.handshake_timeout:
            self._head_timer = self.loop.call_later(settings.handshake_timeout, self._head_timed_out, settings)

    def on_headers_complete(self) -> None:
        self._stop_head_timer()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self, settings: ProtocolSettings) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            settings.limit_tripped("handshake_timeout")
            self.transport.close()


class DrainingWebSocketProtocol(WebSocketsSansIOProtocol):
    """The sans-I/O WebSocket protocol, letting the app finish its response on shutdown."""

    _drain: asyncio.Event | None = None

    def handle_connect(self, event: Request) -> None:
        super().handle_connect(event)
        scope = getattr(self, "scope", None)
        if scope is not None:  # the upgrade was accepted: the app is about to run
            self._drain = asyncio.Event()
            scope["extensions"][DRAIN_EXTENSION] = {"event": self._drain}

    def shutdown(self) -> None:
        if self._drain is not None and self.handshake_complete and not (self.close_sent or self.disconnected):
            self._drain.set()  # the app closes the connection once its response is done
            return
        super().shutdown()

    def keepalive_timeout(self) -> None:
        settings = _settings(self.app_state)
        if settings is not None and not (self.close_sent or self.transport.is_closing()):
            settings.limit_tripped("ping_timeout")
        super().keepalive_timeout()
