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
    """Bytes in, events out: ``feed(chunk) -> list[ServerSentEvent]``, ``flush() -> list``.

    A CR ends its line at once (the event it completes is returned without waiting for
    more bytes); an LF that follows it in the next chunk is the same line end and is
    skipped. A partial line is kept as a list of pieces, joined once its line end
    arrives, so a long line split over many chunks costs linear time.
    """

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial: list[str] = []
        self._started = False
        self._after_cr = False
        self._event = ""
        self._data: list[str] = []
        self._last_id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode ``chunk`` and return every event it completed."""
        return self._consume(self._utf8.decode(chunk))

    def flush(self) -> list[ServerSentEvent]:
        """End of stream: the events still completed by the last bytes; an unterminated
        event (no blank line after it) is dropped."""
        events = self._consume(self._utf8.decode(b"", final=True))
        self._partial = []
        self._after_cr = False
        self._event, self._data = "", []
        return events

    def _consume(self, text: str) -> list[ServerSentEvent]:
        if not self._started and text:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        if self._after_cr and text:
            self._after_cr = False
            if text[0] == "\n":
                text = text[1:]  # the second half of a CRLF split across chunks
        if "\n" not in text and "\r" not in text:
            if text:
                self._partial.append(text)
            return []
        if self._partial:
            self._partial.append(text)
            text = "".join(self._partial)
            self._partial = []
        if "\r" in text:
            # A CR at the very end may be the first half of a CRLF split across chunks.
            self._after_cr = text[-1] == "\r"
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        rest = lines.pop()
        if rest:
            self._partial.append(rest)
        events: list[ServerSentEvent] = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
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
    gives back the same text, its line breaks as LF (SSE has no way to carry a CR).
    An event name cannot hold a line break: that is a ``ValueError``.
    """
    if event and ("\n" in event or "\r" in event):
        raise ValueError(f"An SSE event name cannot contain a line break: {event!r}")
    if isinstance(data, bytes):
        if b"\n" not in data and b"\r" not in data:
            head = b"event: " + event.encode() + b"\n" if event else b""
            return head + b"data: " + data + b"\n\n"
        data = data.decode()
    lines = data.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    head_text = f"event: {event}\n" if event else ""
    return (head_text + "".join(f"data: {line}\n" for line in lines) + "\n").encode()
