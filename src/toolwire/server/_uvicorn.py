"""``DrainingWebSocketProtocol``: what toolwire asks of uvicorn's WebSocket protocol.

``toolwire serve`` runs uvicorn's sans-I/O protocol over the ``websockets`` package
(whose ``ws_max_size``, ``ws_ping_interval`` and ``ws_ping_timeout`` toolwire sets)
through this thin subclass; the HTTP/1.1 protocol is ``_connections``' (every client read
bounded, the upgrade's request head included). On shutdown uvicorn closes every
WebSocket at once (1012), cutting the responses they carry; this one instead sets the
connection's ``toolwire.drain`` event (an ASGI scope extension): the app lets the
response in flight finish, within the grace period, and then closes with 1001. It also
counts a connection dropped because its pong never came (``ws_ping_timeout``), and says
when the connection ends (``on_connection_lost``): until then it holds the place under
``max_connections`` that the HTTP protocol gave it at the upgrade.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.http11 import Request

from ._limits import count_limit

DRAIN_EXTENSION = "toolwire.drain"
"""``scope["extensions"][DRAIN_EXTENSION]``: ``"event"``, set when the server shuts down, and
``"wake"``, a list the app may add callbacks to, each called then (an app waiting on
something else of its own need not wait on the event as well)."""


class DrainingWebSocketProtocol(WebSocketsSansIOProtocol):
    """The sans-I/O WebSocket protocol, letting the app finish its response on shutdown."""

    _drain: asyncio.Event | None = None
    _wake: list[Callable[[], None]] | None = None
    on_connection_lost: Callable[[], None] | None = None
    """Called once the connection has ended (the HTTP protocol that upgraded it gives
    back its place under ``max_connections``)."""

    def handle_connect(self, event: Request) -> None:
        super().handle_connect(event)
        scope = getattr(self, "scope", None)
        if scope is not None:  # the upgrade was accepted: the app is about to run
            self._drain, self._wake = asyncio.Event(), []
            scope["extensions"][DRAIN_EXTENSION] = {"event": self._drain, "wake": self._wake}

    def shutdown(self) -> None:
        if self._drain is not None and self.handshake_complete and not (self.close_sent or self.disconnected):
            self._drain.set()  # the app closes the connection once its response is done
            for wake in self._wake or ():
                wake()
            return
        super().shutdown()

    def connection_lost(self, exc: Exception | None) -> None:
        try:
            super().connection_lost(exc)
        finally:
            if self.on_connection_lost is not None:
                self.on_connection_lost()
                self.on_connection_lost = None

    def keepalive_timeout(self) -> None:
        if not (self.close_sent or self.transport.is_closing()):
            count_limit("ws_ping_timeout")
        super().keepalive_timeout()
