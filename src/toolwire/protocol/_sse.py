"""Server-Sent Events: an incremental decoder and an encoder, exact to the SSE spec.

The decoder takes bytes as they arrive, split anywhere (inside a line, inside a
CRLF pair, inside a multi-byte UTF-8 character), and returns the events completed so
far. It follows the WHATWG "event stream interpretation": LF, CR and CRLF line ends,
``:`` comment lines, several ``data:`` lines joined with ``\\n``, one optional space
after the colon, ``id`` and ``retry`` fields, a leading BOM ignored, and an event
without a terminating blank line discarded at the end of the stream. ``[DONE]`` is
ordinary data.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event. ``event`` defaults to ``"message"`` as the spec says."""

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Bytes in, events out: ``feed(chunk) -> list[ServerSentEvent]``, ``flush() -> list``."""

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._started = False
        self._event = ""
        self._data: list[str] = []
        self._last_id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode ``chunk`` and return every event it completed."""
        return self._consume(self._utf8.decode(chunk), final=False)

    def flush(self) -> list[ServerSentEvent]:
        """End of stream: finish a pending line end; an unterminated event is dropped."""
        events = self._consume(self._utf8.decode(b"", final=True), final=True)
        self._buffer = ""
        self._event, self._data = "", []
        return events

    def _consume(self, text: str, *, final: bool) -> list[ServerSentEvent]:
        if not self._started and text:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        buffer = self._buffer + text
        events: list[ServerSentEvent] = []
        start = 0
        length = len(buffer)
        while start < length:
            cr = buffer.find("\r", start)
            lf = buffer.find("\n", start)
            if cr == -1 and lf == -1:
                break
            if cr != -1 and (lf == -1 or cr < lf):
                if cr + 1 == length and not final:
                    break  # a CR at the very end may be the first half of CRLF
                end, next_start = cr, cr + 2 if cr + 1 < length and buffer[cr + 1] == "\n" else cr + 1
            else:
                end, next_start = lf, lf + 1
            event = self._line(buffer[start:end])
            if event is not None:
                events.append(event)
            start = next_start
        self._buffer = buffer[start:]
        return events

    def _line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line[0] == ":":
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        event_type, data = self._event, self._data
        self._event, self._data = "", []
        if not data:
            return None
        return ServerSentEvent(
            data="\n".join(data),
            event=event_type or "message",
            id=self._last_id,
            retry=self._retry,
        )


def encode_event(data: bytes | str, event: str | None = None) -> bytes:
    """One SSE frame: an optional ``event:`` line, ``data:`` lines, and the blank line.

    Data containing line breaks is split over several ``data:`` lines, so the decoder
    gives back the same text.
    """
    if isinstance(data, bytes):
        if b"\n" not in data and b"\r" not in data:
            head = b"event: " + event.encode() + b"\n" if event else b""
            return head + b"data: " + data + b"\n\n"
        data = data.decode()
    lines = data.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    head_text = f"event: {event}\n" if event else ""
    return (head_text + "".join(f"data: {line}\n" for line in lines) + "\n").encode()
