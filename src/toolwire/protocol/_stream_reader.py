"""Read a Responses SSE stream: bytes -> events -> completed items and the terminal response.

This is the decoding path a Responses *client* needs (the agent runtime, a Responses
backend): only ``response.output_item.done`` yields an item, so deltas can never create
a call; the stream is finished only by exactly one terminal event. A server that ignored
``stream`` and answered with one JSON object (no event stream begins with ``{``) is read
as the stream that would have carried it (``response_as_events``) once its body ends.
"""

from __future__ import annotations

from typing import Any

import orjson

from toolwire.errors import RequestError, UpstreamError, UpstreamProtocolError

from ._events import TERMINAL_EVENT_TYPES, parse_event
from ._items import Item, parse_item
from ._sse import ServerSentEvent, SSEDecoder
from ._whole_response import response_as_events


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
        self._opening = True  # until the body's first bytes that are not blank
        self._whole: list[bytes] | None = None  # a body that began as JSON, until it ends

    @property
    def finished(self) -> bool:
        return self.response is not None

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """Decode ``chunk``; return the events it completed and collect finished items."""
        if self._opening and (begun := chunk.lstrip()):
            self._opening = False
            if begun.startswith(b"{"):
                self._whole = []
        if self._whole is not None:
            self._whole.append(chunk)
            return []
        return self._events(self._sse.feed(chunk))

    def flush(self) -> list[dict[str, Any]]:
        """End of the byte stream. Raises ``UpstreamError`` if no terminal event came."""
        if self._whole is not None:
            events = self._whole_events(b"".join(self._whole))
        else:
            events = self._events(self._sse.flush())
        if self.response is None:
            raise UpstreamError("The stream closed before a terminal event (response.completed).")
        return events

    def _events(self, raw: list[ServerSentEvent]) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for sse in raw:
            if self.response is not None:
                break  # like Codex, stop reading at the terminal event
            if sse.data != "[DONE]":
                self._take(parse_event(sse.data), events)
        return events

    def _whole_events(self, body: bytes) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for event in response_as_events(_whole_response(body)):
            self._take(event, events)
        return events

    def _take(self, event: dict[str, Any], events: list[dict[str, Any]]) -> None:
        """Collect what ``event`` completes (an item, the response) and add it to ``events``."""
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


def _whole_response(body: bytes) -> dict[str, Any]:
    """A body that began with ``{``: a whole Response, or an error object in its place."""
    try:
        answer: dict[str, Any] = orjson.loads(body)  # an object: it begins with {
    except orjson.JSONDecodeError:
        raise UpstreamProtocolError(
            "The server answered a streamed request with a body that is neither an event stream nor JSON."
        ) from None
    if not isinstance(answer.get("output"), list) and not answer.get("error"):
        raise UpstreamProtocolError(
            f"The server answered a streamed request with JSON that is neither a Response nor an error: {body[:200]!r}."
        )
    return answer
