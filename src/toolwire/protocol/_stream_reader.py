"""Read a Responses SSE stream: bytes -> events -> completed items and the terminal response.

This is the decoding path a Responses *client* needs (the agent runtime, a Responses
backend): only ``response.output_item.done`` yields an item, so deltas can never create
a call; the stream is finished only by exactly one terminal event.
"""

from __future__ import annotations

from typing import Any

from toolwire.errors import RequestError, UpstreamError, UpstreamProtocolError

from ._events import TERMINAL_EVENT_TYPES, parse_event
from ._items import Item, parse_item
from ._sse import ServerSentEvent, SSEDecoder


class ResponseStreamReader:
    """``feed(bytes) -> list[event]``; completed items collect in ``items``.

    After the terminal event, ``response`` holds its ``response`` object and ``status``
    its status (``completed``, ``incomplete`` or ``failed``); anything after the terminal
    event is ignored, as Codex stops reading there. A malformed event or output item is
    an ``UpstreamProtocolError``.
    """

    def __init__(self) -> None:
        self._sse = SSEDecoder()
        self.items: list[Item] = []
        self.response: dict[str, Any] | None = None
        self.status: str | None = None

    @property
    def finished(self) -> bool:
        return self.response is not None

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """Decode ``chunk``; return the events it completed and collect finished items."""
        return self._events(self._sse.feed(chunk))

    def flush(self) -> list[dict[str, Any]]:
        """End of the byte stream. Raises ``UpstreamError`` if no terminal event came."""
        events = self._events(self._sse.flush())
        if self.response is None:
            raise UpstreamError("The stream closed before a terminal event (response.completed).")
        return events

    def _events(self, raw: list[ServerSentEvent]) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for sse in raw:
            if self.response is not None:
                break  # like Codex, stop reading at the terminal event
            if sse.data == "[DONE]":
                continue
            event = parse_event(sse.data)
            kind = event["type"]
            if kind == "response.output_item.done":
                index = event.get("output_index")
                where = f"response.output[{index}]" if isinstance(index, int) else "item"
                try:
                    self.items.append(parse_item(event.get("item"), where=where))
                except RequestError as exc:
                    raise UpstreamProtocolError(f"Malformed output item: {exc}") from exc
            elif kind in TERMINAL_EVENT_TYPES:
                response = event.get("response")
                if not isinstance(response, dict):
                    raise UpstreamProtocolError(f"{kind} event without a response object.")
                self.response = response
                self.status = kind.removeprefix("response.")
            events.append(event)
        return events
