"""Server-Sent Events: an incremental decoder and an encoder, exact to the SSE spec.

The decoder takes bytes as they arrive, split anywhere (inside a line, inside a
CRLF pair, inside a multi-byte UTF-8 character), and returns the events completed so
far. It follows the WHATWG "event stream interpretation": LF, CR and CRLF line ends,
``:`` comment lines, several ``data:`` lines joined with ``\\n``, one optional space
after the colon, ``id`` and ``retry`` fields, a leading BOM ignored, and an event
without a terminating blank line discarded at the end of the stream. ``[DONE]`` is
ordinary data.

The decoder holds at most one unfinished line and one unfinished event. A peer that
never ends either would make it hold everything: ``max_line_bytes`` and
``max_event_bytes`` bound them (in bytes of UTF-8), and past either ``feed`` raises
``SSELimitExceeded`` instead of keeping more.
"""

from __future__ import annotations

import codecs
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, TypeVar

_Dispatched = TypeVar("_Dispatched")

_LF, _CR = ord("\n"), ord("\r")  # as ints, ``in`` scans bytes several times faster

_FRAME_STARTS: dict[str | None, bytes] = {None: b"data: ", "": b"data: "}
"""What a one-line frame holds before its data, by event name: made once per name."""
_MAX_FRAME_STARTS = 512  # names come from upstreams too: the table must not grow forever
_UTF8_DECODER = codecs.getincrementaldecoder("utf-8")  # looked up once, not per stream


class SSELimitExceeded(Exception):
    """A line or an event grew past the decoder's limit; ``what`` says which."""

    def __init__(self, what: Literal["line", "event"], limit: int) -> None:
        super().__init__(f"an SSE {what} longer than {limit} bytes")
        self.what = what
        self.limit = limit


def _utf8_size(text: str) -> int:
    """The size of ``text`` in UTF-8, without encoding it when it is ASCII (O(1) then)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _longer_than(text: str, limit: int) -> bool:
    """``_utf8_size(text) > limit``, deciding from the length alone when it can."""
    length = len(text)
    if length > limit:
        return True
    return length * 4 > limit and _utf8_size(text) > limit


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event. ``event`` defaults to ``"message"`` as the spec says."""

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Bytes in, events out: ``feed(chunk) -> list[ServerSentEvent]``, ``flush() -> list``;
    ``feed_data`` / ``flush_data`` give only each event's ``data``, for readers that use
    nothing else (no event object is built).

    A CR ends its line at once (the event it completes is returned without waiting for
    more bytes); an LF that follows it in the next chunk is the same line end and is
    skipped. A partial line is kept as a list of pieces, joined once its line end
    arrives, so a long line split over many chunks costs linear time.

    The text is cut into blocks at blank lines. A block that is one ``data: `` line
    (what nearly every server sends) becomes its event directly; any other block, and
    the unfinished block at the end, go line by line through the spec's rules.

    A line longer than ``max_line_bytes``, or an event whose data is longer than
    ``max_event_bytes``, raises ``SSELimitExceeded`` from ``feed`` as soon as the bytes
    that make it too long arrive; the decoder is not usable after that.
    """

    def __init__(self, *, max_line_bytes: int = sys.maxsize, max_event_bytes: int = sys.maxsize) -> None:
        self._max_line = max_line_bytes
        self._max_event = max_event_bytes
        # A block shorter than this cannot break either limit, whatever its characters.
        self._checked_from = min(max_line_bytes, max_event_bytes) // 4
        self._utf8 = _UTF8_DECODER(errors="replace")
        self._partial: list[str] = []
        self._partial_size = 0
        self._started = False
        self._after_cr = False
        self._event = ""
        self._data: list[str] = []
        self._data_size = 0
        self._last_id: str | None = None
        self._retry: int | None = None

    @property
    def idle(self) -> bool:
        """Between two events: the stream's start (and its BOM) behind, and nothing held
        of a character, a line, a CRLF pair or an event. Bytes ``data: X`` + LF LF (X one
        line) fed now would give exactly one event, whose data is X, and leave it idle."""
        return (
            self._started
            and not self._partial
            and not self._data
            and not self._event
            and not self._after_cr
            and not self._utf8.getstate()[0]
        )

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode ``chunk`` and return every event it completed."""
        return self._consume(self._utf8.decode(chunk), self._new_event)

    def flush(self) -> list[ServerSentEvent]:
        """End of stream: the events still completed by the last bytes; an unterminated
        event (no blank line after it) is dropped."""
        events = self._consume(self._utf8.decode(b"", final=True), self._new_event)
        self._reset()
        return events

    def feed_data(self, chunk: bytes) -> list[str]:
        """Like ``feed``, but only the ``data`` of each event."""
        return self._consume(self._utf8.decode(chunk), str)

    def flush_data(self) -> list[str]:
        """Like ``flush``, but only the ``data`` of each event."""
        data = self._consume(self._utf8.decode(b"", final=True), str)
        self._reset()
        return data

    def _reset(self) -> None:
        self._partial, self._partial_size = [], 0
        self._after_cr = False
        self._event, self._data, self._data_size = "", [], 0

    def _consume(self, text: str, dispatch: Callable[[str], _Dispatched]) -> list[_Dispatched]:
        """The events ``text`` completes, each made by ``dispatch`` from its data."""
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
                self._keep_partial(text)
            return []
        if self._partial:
            self._partial.append(text)
            text = "".join(self._partial)
            self._partial, self._partial_size = [], 0
        if "\r" in text:
            # A CR at the very end may be the first half of a CRLF split across chunks.
            self._after_cr = text[-1] == "\r"
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        blocks = text.split("\n\n")
        rest = blocks.pop()  # the block still open, possibly empty
        events: list[_Dispatched] = []
        checked_from = self._checked_from
        for block in blocks:
            # The common shape: one data line, and no earlier line of its event pending
            # (the first block may continue lines read from an earlier chunk).
            if block.startswith("data: ") and "\n" not in block and not self._data and not self._event:
                if len(block) > checked_from:
                    self._check_line(block)
                    self._check_event(block[6:])
                events.append(dispatch(block[6:]))
                continue
            for line in block.split("\n"):
                self._line(line, dispatch, events)
            self._line("", dispatch, events)  # the blank line that ended the block
        if "\n" in rest:
            lines = rest.split("\n")
            rest = lines.pop()
            for line in lines:
                self._line(line, dispatch, events)
        if rest:
            self._keep_partial(rest)
        return events

    def _keep_partial(self, text: str) -> None:
        """Hold ``text``, the start (or more) of a line whose end has not arrived."""
        self._partial.append(text)
        self._partial_size += _utf8_size(text)
        if self._partial_size > self._max_line:
            raise SSELimitExceeded("line", self._max_line)

    def _check_line(self, line: str) -> None:
        if _longer_than(line, self._max_line):
            raise SSELimitExceeded("line", self._max_line)

    def _check_event(self, data: str) -> None:
        if _longer_than(data, self._max_event):
            raise SSELimitExceeded("event", self._max_event)

    def _line(self, line: str, dispatch: Callable[[str], _Dispatched], events: list[_Dispatched]) -> None:
        if not line:
            self._dispatch(dispatch, events)
            return
        if len(line) > self._checked_from:
            self._check_line(line)
        if line[0] == ":":
            return
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data_size += _utf8_size(value) + (1 if self._data else 0)  # + the joining LF
            if self._data_size > self._max_event:
                raise SSELimitExceeded("event", self._max_event)
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)

    def _dispatch(self, dispatch: Callable[[str], _Dispatched], events: list[_Dispatched]) -> None:
        if self._data:
            events.append(dispatch("\n".join(self._data)))
        self._event, self._data, self._data_size = "", [], 0

    def _new_event(self, data: str) -> ServerSentEvent:
        return ServerSentEvent(data=data, event=self._event or "message", id=self._last_id, retry=self._retry)


def encode_event(data: bytes | str, event: str | None = None) -> bytes:
    """One SSE frame: an optional ``event:`` line, ``data:`` lines, and the blank line.

    Data containing line breaks is split over several ``data:`` lines, so the decoder
    gives back the same text, its line breaks as LF (SSE has no way to carry a CR).
    An event name cannot hold a line break: that is a ``ValueError``.
    """
    start = _frame_start(event)
    if isinstance(data, bytes):
        if _LF not in data and _CR not in data:
            return b"".join((start, data, b"\n\n"))  # the data copied once (a + b + c copies it twice)
        data = data.decode()
    lines = data.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    head_text = f"event: {event}\n" if event else ""
    return (head_text + "".join(f"data: {line}\n" for line in lines) + "\n").encode()


def encode_events(frames: Iterable[tuple[bytes, str | None]]) -> bytes:
    """The SSE frames of ``(data, event)`` pairs, one after the other: what joining their
    ``encode_event`` gives, with each event's data copied once instead of twice (a stream's
    events are written in one piece, and a Response echoing Codex's tools is 10 kB)."""
    parts: list[bytes] = []
    for data, event in frames:
        if _LF in data or _CR in data:
            parts.append(encode_event(data, event))
        else:
            parts += (_frame_start(event), data, b"\n\n")
    return b"".join(parts)


def _frame_start(event: str | None) -> bytes:
    """``event: <name>\\ndata: `` (``data: `` alone without a name), or a ``ValueError``."""
    try:
        return _FRAME_STARTS[event]
    except (KeyError, TypeError):
        pass
    if event and ("\n" in event or "\r" in event):
        raise ValueError(f"An SSE event name cannot contain a line break: {event!r}")
    start = b"event: " + event.encode() + b"\ndata: " if event else b"data: "
    if isinstance(event, str) and len(_FRAME_STARTS) < _MAX_FRAME_STARTS:
        _FRAME_STARTS[event] = start
    return start
