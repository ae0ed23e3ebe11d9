"""``UpstreamConnector``: aiohttp's TCP connector, whose connections resume only what is
paused and never leave a reader waiting on a body they have given up parsing.

**Resuming.** aiohttp's ``StreamReader`` asks its connection's protocol to resume reading
every time a reader takes a piece of the body while the buffer is under its low-water mark,
paused or not; the protocol then feeds its HTTP parser an empty read and resumes the
transport. The body of a streamed answer is buffered one HTTP chunk to a piece, and a model
server writes one chunk per SSE event, so reading a 44-event answer made 44 such calls: 35 µs
of the 71 it took to read an answer that had arrived whole (in process), 6.7 % of the
gateway's instructions per request (bench/RESULTS.md, 2026-12-04). The protocol here passes
a resume to aiohttp only when reading is paused: by flow control (the reader's buffer over
its high-water mark, too many chunks unread, decompressed bytes piling up) or by a buffer
the protocol cannot drain yet. Those pauses, and everything else, stay aiohttp's own code.
A resume when nothing is paused has nothing to do: the parser only keeps bytes back when it
was paused, and the transport is reading.

**A body that breaks HTTP's framing** (a chunk size that is not hex, a chunk longer than it
said): aiohttp's C parser (``_http_parser.pyx``, 3.14) drops the body's reader and raises;
the protocol closes the connection and keeps the error to itself, and the reader hears
nothing, not even the close: it waits for its timeout, which then reads as a stall. The
protocol here hands that error to the body's reader (``MalformedBody``). aiohttp's
pure-Python parser (``AIOHTTP_NO_EXTENSIONS``) tells the reader itself, with its own
``HttpProcessingError``, which is not a ``ClientError``: ``BODY_READ_ERRORS`` names both.

aiohttp has no public way to choose its connections' protocol: the connector keeps the
factory it makes them with in ``_factory`` (aiohttp 3.x; pinned in pyproject.toml). If
that ever changes, ``UpstreamConnector`` raises at once rather than quietly reading
without it (tests/upstream/test_connector.py).
"""

from __future__ import annotations

import functools
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.helpers import _EXC_SENTINEL
from aiohttp.http_exceptions import HttpProcessingError

BODY_READ_ERRORS = (TimeoutError, aiohttp.ClientError, OSError, HttpProcessingError)
"""What reading an answer's body may raise: a timeout, a broken connection or stream, a body
that breaks HTTP's framing."""


def parser_said(message: object) -> str:
    """An HTTP parser's message on one line. aiohttp's C parser writes the fault, then the
    bytes it stopped at and a caret under them: ``Invalid character in chunk size:\n\n
    b'zz'\n  ^`` reads ``Invalid character in chunk size: b'zz'``."""
    lines = str(message).strip().split("\n")
    if len(lines) >= 3 and lines[0].endswith(":") and not lines[1].strip():
        return f"{lines[0]} {lines[2].strip()[:200]}"
    return lines[0][:500]


class MalformedBody(aiohttp.ClientPayloadError):
    """A body the parser could not read, with what the parser said: the C parser's error
    reaches the protocol as a plain ``HttpProcessingError`` and names the fault; a kind of
    error (the pure-Python parser's, which quotes the bytes) is named too."""

    def __init__(self, parser_error: HttpProcessingError) -> None:
        said, kind = parser_said(parser_error.message), type(parser_error).__name__
        super().__init__(said if kind == HttpProcessingError.__name__ else f"{kind}: {said}")


class _UpstreamProtocol(ResponseHandler):
    """A client connection's protocol that ignores a resume when reading is not paused and
    tells a body's reader when its bytes could not be parsed."""

    def resume_reading(self, resume_parser: bool = True) -> None:
        if self._reading_paused or self._buffer_paused:
            super().resume_reading(resume_parser)

    def set_exception(self, exc: BaseException, exc_cause: BaseException = _EXC_SENTINEL) -> None:
        super().set_exception(exc, exc_cause)
        body = self._payload  # the answer being read (or one read to its end before)
        if isinstance(exc, HttpProcessingError) and body is not None and not body.is_eof() and body.exception() is None:
            body.set_exception(MalformedBody(exc), exc)


class UpstreamConnector(aiohttp.TCPConnector):
    """``aiohttp.TCPConnector`` (same arguments) making ``_UpstreamProtocol`` connections."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        made_by = getattr(self, "_factory", None)
        if not isinstance(made_by, functools.partial) or made_by.func is not ResponseHandler:
            raise RuntimeError("this aiohttp makes its connections differently: UpstreamConnector needs updating")
        protocol: type[ResponseHandler] = _UpstreamProtocol
        self._factory = functools.partial(protocol, *made_by.args, **made_by.keywords)
