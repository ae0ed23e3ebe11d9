"""``Transport``: the seam between the exchange pipeline and a client connection.

The pipeline decides *what* is said (an error, a whole Response, a stream of events);
a transport frames it and delivers it, and says when the client has gone. HTTP + SSE
is one (``_http_responses``); a WebSocket carrying several exchanges is another. A
transport never parses, routes, translates, stores or records: the pipeline does.

A client's leaving is told by a callback (``Departures``), not by a task waiting for it:
a task per exchange costs its creation, a step to start, a future to wait on, a wake-up
when the answer is out and a callback at its end: about 1 % of a streamed request's
instructions (bench/RESULTS.md, 2026-12-05). toolwire's HTTP protocol (``_connections``)
offers each request the watch of its connection's ``Departures`` as the ASGI scope
extension ``CLIENT_GONE_EXTENSION``; under a server that does not, the HTTP transport
waits for ``http.disconnect`` in a task of its own, as ASGI has it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

JSON = dict[str, Any]

CLIENT_GONE_EXTENSION = "toolwire.client_gone"
"""``scope["extensions"][CLIENT_GONE_EXTENSION]["watch"]``: ``Departures.watch`` of the
request's connection."""

log = logging.getLogger("toolwire.server")

Watch = Callable[[Callable[[], None]], Callable[[], None]]
"""How a client's leaving is watched: called with what to call then, it gives what ends the watch."""


@dataclass(frozen=True, slots=True)
class ErrorAnswer:
    """A failure before anything was streamed: an OpenAI-shaped ``body`` and its HTTP status.

    The body's message is already redacted; ``retry_after`` keeps an upstream 429's
    ``retry-after``.
    """

    status: int
    body: JSON
    retry_after: str | None = None


class Transport(Protocol):
    """How one exchange's answer reaches its client."""

    async def send_error(self, error: ErrorAnswer) -> None:
        """Nothing was sent yet: answer with an error."""
        ...

    async def send_response(self, response: JSON) -> None:
        """A whole Response object (a request that did not ask for a stream)."""
        ...

    async def open_stream(self) -> None:
        """A stream of events begins."""
        ...

    async def send_events(self, events: list[Any], *, last: bool) -> None:
        """Stream events, in order; ``last`` ends the stream in the same write."""
        ...

    def watch_client(self, on_gone: Callable[[], None]) -> Callable[[], None]:
        """Call ``on_gone`` once if the client goes away (at once if it is gone already);
        the function returned ends the watch."""
        ...


class Departures:
    """Who to tell when a client connection is lost: the watches of the exchanges it carries.

    ``depart`` calls each watch once; a watch that comes after it is called at once.
    """

    __slots__ = ("_watches", "gone")

    def __init__(self) -> None:
        self._watches: list[Callable[[], None]] = []
        self.gone = False

    def watch(self, on_gone: Callable[[], None]) -> Callable[[], None]:
        """Call ``on_gone`` when the client goes away; the function returned ends the watch."""
        if self.gone:
            on_gone()
        else:
            self._watches.append(on_gone)
        return functools.partial(self._unwatch, on_gone)

    def _unwatch(self, on_gone: Callable[[], None]) -> None:
        if on_gone in self._watches:  # else called already
            self._watches.remove(on_gone)

    def depart(self) -> None:
        """The client has gone: call each watch, once (one that fails is logged; the others
        are still called)."""
        self.gone = True
        watches, self._watches = self._watches, []
        for on_gone in watches:
            try:
                on_gone()
            except Exception:
                log.exception("a watch on a client that left failed")
