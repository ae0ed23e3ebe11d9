"""``KeptTransport``: a ``Transport`` (the pipeline's seam to a client) that keeps each
delivery, in order, for tests that drive ``ExchangePipeline`` or ``pump`` directly; with
``answer_on`` (an ``Answer`` given through it) and ``nothing_to_keep`` (a ``Keep`` that
stores nothing)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolwire.server._answer import Answer
from toolwire.server._exchange import Exchange
from toolwire.server._transport import ErrorAnswer
from toolwire.server.observe import Redactor


@dataclass
class KeptTransport:
    """A ``Transport`` that keeps each delivery, in order."""

    deliveries: list[tuple[Any, ...]] = field(default_factory=list)

    async def send_error(self, error: ErrorAnswer) -> None:
        self.deliveries.append(("error", error))

    async def send_response(self, response: dict[str, Any]) -> None:
        self.deliveries.append(("response", response))

    async def open_stream(self) -> None:
        self.deliveries.append(("open",))

    async def send_events(self, events: list[Any], *, last: bool) -> None:
        self.deliveries.append(("events", list(events), last))

    def watch_client(self, on_gone: Callable[[], None]) -> Callable[[], None]:
        """The client never leaves: nothing to watch."""
        return lambda: None

    def event_deliveries(self) -> list[tuple[list[str], bool]]:
        return [([e["type"] for e in d[1]], d[2]) for d in self.deliveries if d[0] == "events"]

    def events(self) -> list[dict[str, Any]]:
        return [event for d in self.deliveries if d[0] == "events" for event in d[1]]


def answer_on(transport: KeptTransport, secrets: tuple[str, ...] = ()) -> Answer:
    """An exchange's ``Answer`` given through ``transport``, ``secrets`` redacted from it."""
    return Answer(Exchange("resp_1", b"{}"), transport, Redactor(secrets).redact_json)


async def nothing_to_keep(response: dict[str, Any]) -> None:
    """A ``Keep`` that stores nothing."""
