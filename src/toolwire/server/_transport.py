"""``Transport``: the seam between the exchange pipeline and a client connection.

The pipeline decides *what* is said (an error, a whole Response, a stream of events);
a transport frames it and delivers it, and says when the client has gone. HTTP + SSE
is one (``_http_responses``); a WebSocket carrying several exchanges is another. A
transport never parses, routes, translates, stores or records: the pipeline does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

JSON = dict[str, Any]


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

    async def client_gone(self) -> None:
        """Return when the client has gone away (never, while it is still there)."""
        ...
